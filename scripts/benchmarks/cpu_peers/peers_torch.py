"""The PyTorch side (peers' venv): Hugging Face `ElectraModel` + the same head as ours.

Fine-tuning step: eager with `torch.optim.AdamW(fused=True)` (one fused kernel for all
parameters; the default takes the per-parameter loop on a CPU), and the same model under
`torch.compile` (forward and backward through Inductor), same optimizer. Serving: the fast Rust
tokenizer (`AutoTokenizer`, as users load it) + the model, fp32: eager in `inference_mode`,
`torch.compile(dynamic=True)` in `inference_mode` (one compile for all widths), and the same
compiled with Inductor's freezing (`options={"freezing": True}`, called under `torch.no_grad()`:
weights folded into the graph as constants and pre-packed for oneDNN, as ONNX Runtime pre-packs
them at load); `check_frozen` refuses to time a frozen row whose compile did not take the freezing
path. Each serving row pads either to our width rule or to the longest row (the case's
`pad_multiple`).
"""

from __future__ import annotations

from pathlib import Path

from scripts.benchmarks.cpu_peers.timing import THREADS, warm_up, warm_up_finetuning
from scripts.benchmarks.cpu_peers.traffic import LONGEST, WIDTH_MULTIPLE, ft_batches

LR, WEIGHT_DECAY, EPS, CLIP = 5e-5, 0.01, 1e-6, 1.0


def classifier(hf_dir, head_npz, attn_implementation="sdpa", dropout=0.1):
    """ElectraModel + the reference head (dropout, dense on the [CLS] vector) with our head's weights."""
    import numpy as np
    import torch
    from transformers import ElectraModel

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = ElectraModel.from_pretrained(hf_dir, attn_implementation=attn_implementation)
            self.dropout = torch.nn.Dropout(dropout)
            self.out = torch.nn.Linear(self.encoder.config.hidden_size, 2)
            head = np.load(head_npz)
            with torch.no_grad():
                self.out.weight.copy_(torch.from_numpy(head["kernel"].T.copy()))
                self.out.bias.copy_(torch.from_numpy(head["bias"]))

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state
            return self.out(self.dropout(hidden[:, 0]))

    return Classifier()


def tokenizer(hf_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hf_dir)  # the Rust `tokenizers` WordPiece
    assert tok.is_fast, type(tok)
    return tok


def encoder_fn(hf_dir, seq, tensors, multiple=WIDTH_MULTIPLE):
    """texts -> padded ids: to the longest row rounded up to `multiple` (our width rule), or to the
    longest row only (multiple LONGEST, the tokenizer's own default)."""
    tok = tokenizer(hf_dir)
    pad_to = None if multiple == LONGEST else multiple

    def encode(texts):
        return tok(texts, padding="longest", pad_to_multiple_of=pad_to, truncation=True, max_length=seq,
                   return_tensors=tensors, return_token_type_ids=True)

    return encode


def token_ids(hf_dir, texts, seq):
    """The peers' token ids of each text (cut at `seq`, no padding): the driver checks them against ours."""
    return tokenizer(hf_dir)(list(texts), truncation=True, max_length=seq)["input_ids"]


_FREEZING_COMPILES = [0]


def count_freezing_compiles():
    """Counts the graphs Inductor compiles through its freezing path (`fw_compiler_freezing`, which
    compile_fx picks only when freezing is on and grad is off): the check that a frozen row is frozen."""
    import torch._inductor.compile_fx as compile_fx

    if not getattr(compile_fx.fw_compiler_freezing, "_counted", False):
        inner = compile_fx.fw_compiler_freezing

        def counted(*args, **kwargs):
            _FREEZING_COMPILES[0] += 1
            return inner(*args, **kwargs)

        counted._counted = True
        compile_fx.fw_compiler_freezing = counted
    return _FREEZING_COMPILES


def check_frozen(compiles_before, compiles_after, case_id):
    if compiles_after <= compiles_before:
        raise RuntimeError(f"{case_id}: Inductor compiled no graph through its freezing path; "
                           f"the row would time an unfrozen model")


class TorchSide:
    def __init__(self, work: Path):
        import torch

        torch.set_num_threads(THREADS)
        torch.set_num_interop_threads(1)
        self.torch = torch
        self.work = work
        self.cases = {}

    def versions(self):
        import torch
        import transformers

        return {"torch": torch.__version__, "transformers": transformers.__version__}

    def token_ids(self, hf_dir, texts, seq):
        return token_ids(hf_dir, texts, seq)

    def prepare(self, case):
        return self._prepare_ft(case) if case["kind"] == "ft" else self._prepare_serve(case)

    # ------------------------------------------------------------------ fine-tuning
    def _prepare_ft(self, case):
        import numpy as np
        import torch

        torch.manual_seed(0)
        model = classifier(case["hf_dir"], case["head"])
        model.train()
        no_decay = [p for n, p in model.named_parameters() if "LayerNorm" in n or n.endswith("bias")]
        decay = [p for n, p in model.named_parameters() if not ("LayerNorm" in n or n.endswith("bias"))]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=LR, eps=EPS, fused=True)
        forward = torch.compile(model, isolate_recompiles=True) if case["variant"] == "compile" else model

        def as_torch(ids, mask, labels):
            return tuple(torch.from_numpy(a.astype(np.int64)) for a in (ids, mask, labels))

        batches = ft_batches(case, as_torch)
        state = {"batch": case["batch"], "next": 0}

        def step():
            ids, mask, labels = batches[state["next"] % len(batches)]
            state["next"] += 1
            logits = forward(ids, mask, torch.zeros_like(ids))
            loss = torch.nn.functional.cross_entropy(logits, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
            float(loss.detach())
            return int(mask.sum()), ids.numel()

        return warm_up_finetuning(state, [ids.shape[1] for ids, _, _ in batches], step)

    # ------------------------------------------------------------------ serving
    def _prepare_serve(self, case):
        import torch

        variant = case["variant"]
        encode = encoder_fn(case["hf_dir"], case["seq"], "pt", case.get("pad_multiple", WIDTH_MULTIPLE))
        model = classifier(case["hf_dir"], case["head"]).eval()
        # Freezing needs grad off at compile and call time; no_grad (not inference_mode, which would
        # guard a second compile) for every call of the frozen row.
        grad_off = torch.inference_mode
        # isolate_recompiles: the compiled rows share one forward, and without it one row's graphs
        # count against the others' recompile limit (past it Dynamo silently runs eager) and may be
        # reused by another row (a frozen row picking an unfrozen graph).
        if variant == "compile":
            model = torch.compile(model, dynamic=True, isolate_recompiles=True)
        elif variant == "compile_frozen":
            model = torch.compile(model, dynamic=True, isolate_recompiles=True, options={"freezing": True})
            grad_off = torch.no_grad
            frozen = count_freezing_compiles()
            before = frozen[0]
        elif variant != "eager":
            raise ValueError(f"unknown serving variant {variant!r}")

        def logits(texts):
            enc = encode(texts)
            with grad_off():
                return model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).numpy()

        state = {"logits": logits, "call": lambda texts: logits(texts).argmax(-1)}
        state = warm_up(state, case)
        if variant == "compile_frozen":
            check_frozen(before, frozen[0], case["id"])
            state["frozen_graphs"] = frozen[0] - before
            state["report"] = ("warmup_s", "frozen_graphs")
        return state
