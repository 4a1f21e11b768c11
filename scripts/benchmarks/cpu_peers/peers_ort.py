"""The ONNX Runtime side (peers' venv): the PyTorch classifier exported to ONNX and optimised the
way ONNX Runtime's own tools optimise a BERT.

The export uses Hugging Face's eager attention (`attn_implementation="eager"`; the SDPA model's
TorchScript export leaves attention as MatMul + Softmax nodes that the optimiser cannot fuse), with
dynamic batch and length. `onnxruntime.transformers.optimizer.optimize_model(model_type="bert")`
then fuses embeddings + LayerNorm, every self-attention into one `Attention` node, bias + GELU and
the residual LayerNorms; `check_fused` refuses to time a graph without `Attention` nodes. int8:
`quantize_dynamic` of the optimised graph (QAttention, int8 MatMuls). Sessions: 2 intra-op threads,
1 inter-op thread, all graph optimisations. Inputs padded to our width rule or to the longest row
(the case's `pad_multiple`).
"""

from __future__ import annotations

import collections
from pathlib import Path

from scripts.benchmarks.cpu_peers.peers_torch import classifier, encoder_fn, token_ids
from scripts.benchmarks.cpu_peers.timing import THREADS, warm_up
from scripts.benchmarks.cpu_peers.traffic import WIDTH_MULTIPLE

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export_fused(hf_dir, head, path: Path):
    """Writes the fp32 ONNX graph with fused attention to `path`; returns its op counts."""
    import torch
    from onnxruntime.transformers.optimizer import optimize_model

    raw = path.with_suffix(".raw.onnx")
    model = classifier(hf_dir, head, attn_implementation="eager").eval()
    ids = torch.ones(2, 16, dtype=torch.int64)
    with torch.no_grad():
        torch.onnx.export(model, (ids, ids, torch.zeros_like(ids)), str(raw), input_names=list(INPUTS),
                          output_names=["logits"], dynamo=False, opset_version=17,
                          dynamic_axes={k: {0: "batch", 1: "seq"} for k in INPUTS} | {"logits": {0: "batch"}})
    cfg = model.encoder.config
    opt = optimize_model(str(raw), model_type="bert", num_heads=cfg.num_attention_heads,
                         hidden_size=cfg.hidden_size, opt_level=0)
    opt.save_model_to_file(str(path))
    raw.unlink()
    return op_counts(path)


def op_counts(path):
    import onnx

    return dict(collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node))


def check_fused(counts, layers, path):
    """Refuses a graph whose self-attention is not fused into one node per layer."""
    fused = counts.get("Attention", 0) + counts.get("QAttention", 0) + counts.get("MultiHeadAttention", 0)
    if fused < layers:
        raise RuntimeError(f"{path}: {fused} fused attention nodes for {layers} layers (ops: {counts}); "
                           f"ONNX Runtime would run attention as separate MatMul/Softmax nodes")
    return fused


class OrtSide:
    def __init__(self, work: Path):
        self.work = work
        self.cases = {}

    def versions(self):
        import onnx
        import onnxruntime

        return {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__}

    def token_ids(self, hf_dir, texts, seq):
        return token_ids(hf_dir, texts, seq)

    def graph(self, case, int8):
        """(path, op counts) of the case's fused fp32 or int8 graph, written once per model."""
        path = self.work / f"{case['model']}_fused.onnx"
        if not path.exists():
            export_fused(case["hf_dir"], case["head"], path)
        if int8:
            qpath = self.work / f"{case['model']}_fused.int8.onnx"
            if not qpath.exists():
                import onnx
                from onnxruntime.quantization import QuantType, quantize_dynamic

                # The fused graph's contrib ops (Attention, SkipLayerNormalization) have no ONNX shape
                # inference: their outputs are float32.
                quantize_dynamic(str(path), str(qpath), weight_type=QuantType.QInt8,
                                 extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            path = qpath
        return path, op_counts(path)

    def prepare(self, case):
        import numpy as np
        import onnxruntime as ort

        path, counts = self.graph(case, case["variant"] == "int8")
        fused = check_fused(counts, case["layers"], path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = THREADS
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        encode = encoder_fn(case["hf_dir"], case["seq"], "np", case.get("pad_multiple", WIDTH_MULTIPLE))

        def logits(texts):
            enc = encode(texts)
            return sess.run(["logits"], {k: enc[k].astype(np.int64) for k in INPUTS})[0]

        state = {"logits": logits, "call": lambda texts: logits(texts).argmax(-1)}
        state = warm_up(state, case)
        state.update(onnx=path.name, fused_attention_nodes=fused,
                     report=("warmup_s", "onnx", "fused_attention_nodes"))
        return state
