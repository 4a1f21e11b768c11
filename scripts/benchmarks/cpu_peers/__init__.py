"""Fine-tuning and serving on a CPU, ours against PyTorch and ONNX Runtime (the package behind
scripts/benchmarks/benchmark_cpu_tasks.py).

What is compared lives in one module per side:

- `ours`: our fine-tuning step (`ClassifierModel` + fine-tuning's optimizer) and our exported
  SavedModel (in-graph tokenizer): the default, the `--freeze_weights` and `--jit_compile` opt-ins
  (the latter also with its warm-up requests replayed at load), the bf16 opt-in, and the LiteRT
  text-in file (`--format tflite`, fp32 and `--quantize int8`) in LiteRT's interpreter;
- `peers_torch`: Hugging Face `ElectraModel` on PyTorch, eager with `AdamW(fused=True)` and
  `torch.compile`, serving in fp32 (eager, compiled, compiled with Inductor's freezing);
- `peers_ort`: ONNX Runtime on the same model exported with eager attention and optimised by
  `onnxruntime.transformers` (`model_type="bert"`; an `Attention` node is checked for before any
  timing), fp32 and int8 dynamic quantisation.

Every peer serving row runs padded like ours and padded to the longest row; the faster counts.

How it is measured: `traffic` (which texts, widths, fresh texts every round, the token-id check),
`timing` (worker processes, interleaved rounds, cold calls against a repeated call at the same
width, CPU time / wall, load), `report` (paired-round ratios against the best peer of each row,
each with its verdict against `report.BARS`, and the goals met and missed per export).
"""
