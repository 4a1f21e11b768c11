"""Fine-tuning and serving on a CPU, side by side with PyTorch and ONNX Runtime, on the same weights.

    bash scripts/benchmarks/setup_cpu_peers.sh          # once: .venv-peers (torch, transformers, onnxruntime)
    python scripts/benchmarks/benchmark_cpu_tasks.py --json runs/bench_cpu_tasks.json
    python scripts/benchmarks/benchmark_cpu_tasks.py --quick   # smoke run (5-10 minutes on 2 cores)

One run measures, on real IMDB reviews from ../shared/data/imdb (their real
length distribution), with 2 threads per side:

1. Fine-tuning step (examples/s, batch 32, 128 and 256 tokens): ours (`ClassifierModel` +
   the fine-tuning optimizer `make_optimizer` of `electra_tf.finetune`, compiled as
   `finetune_job` compiles it, trained with `train_on_batch`), without and with XLA,
   against PyTorch eager (Hugging Face `ElectraModel` + the same head, `torch.optim.AdamW`,
   the same clipping, fp32). Both train on the same token ids. Both also with length buckets
   (reviews sorted by length, batched, each batch padded to its longest row).
2. Inference, raw strings to labels (reviews/s at batch 32, p50 / p99 latency at batch 1):
   our exported SavedModel (in-graph tokenizer, loaded as TF Serving loads it), `Predictor`
   on the same SavedModel, and ours in bf16; against tokenizers + PyTorch (fp32, bf16
   autocast) and ONNX Runtime (the PyTorch model exported with `torch.onnx.export`,
   fp32, and int8 dynamic quantization, ONNX Runtime's reduced precision on a CPU).
3. Length: `Predictor` sorting its texts by length before batching, against batches taken
   in the input order.

Models: ELECTRA-Small shape (our random-initialised weights, `--seed`) and the public
all-MiniLM-L6-v2 encoder (../shared/data/encoders, imported with `convert --from hf`);
each is exported with `python -m electra_tf.convert --to hf` for the peers, and the same
classification head (weights drawn once) is copied to every side. Every figure comes from
long-lived worker processes (ours in this venv, the peers in --peer_python) that take
turns round by round, the order flipping every round, so that load from other processes
hits both alike; a figure is the median of `--rounds` rounds, the load average
(`os.getloadavg`) is recorded before and after every round.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
MINILM = DATA / "encoders" / "all-MiniLM-L6-v2"
LABELS = ["negative", "positive"]
THREADS = 2
LR, WEIGHT_DECAY, EPS, CLIP = 5e-5, 0.01, 1e-6, 1.0


# ============================================================================ shared helpers
def read_reviews(split: str, n: int, offset: int = 0):
    """(texts, labels) of IMDB reviews `offset .. offset + n` of imdb/<split>.tsv.gz, in file order."""
    csv.field_size_limit(1 << 30)
    texts, labels = [], []
    with gzip.open(DATA / "imdb" / f"{split}.tsv.gz", "rt", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)):
            if i < offset:
                continue
            if len(texts) >= n:
                break
            texts.append(row["sentence"])
            labels.append(int(row["label"]))
    return texts, labels


def read_sst2(n: int):
    """(texts, labels) of the first `n` GLUE SST-2 training sentences (short texts: most of a
    128-piece row is padding)."""
    texts, labels = [], []
    with open(DATA / "glue" / "SST-2" / "train.tsv", encoding="utf-8") as f:
        next(f)
        for line, _ in zip(f, range(n)):
            text, label = line.rstrip("\n").split("\t")
            texts.append(text)
            labels.append(int(label))
    return texts, labels


def percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def rss_bytes():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def length_batches(lengths, batch, mode, seed=0):
    """Index batches of `batch` rows and the width each is padded to.

    mode "fixed": input order; "longest": input order, each batch padded to its longest
    row; "bucket": rows sorted by length first, the batches then shuffled (seeded). The
    width returned is the batch's longest row (the caller pads "fixed" to the maximum).
    """
    import numpy as np

    lengths = np.asarray(lengths)
    order = np.argsort(lengths, kind="stable") if mode == "bucket" else np.arange(len(lengths))
    out = []
    for start in range(0, len(order) - batch + 1, batch):
        idx = order[start:start + batch]
        width = int(lengths[idx].max())
        out.append((idx, width))
    if mode == "bucket":
        perm = np.random.default_rng(seed).permutation(len(out))
        out = [out[i] for i in perm]
    return out


# ============================================================================ worker: ours (TensorFlow)
class Ours:
    """Our side: TF 2.21 / Keras 3, in the project's venv."""

    def __init__(self, work: Path):
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(THREADS)
        tf.config.threading.set_inter_op_parallelism_threads(THREADS)
        self.tf = tf
        self.work = work
        self.cases = {}

    # ---------------------------------------------------------------- preparation (run once)
    def make_models(self, seed: int, models):
        """Writes our model directories, their Hugging Face copies, the classifier seed
        directories, SavedModels and the head weights; returns what it wrote."""
        import keras

        from electra_tf.config import ElectraConfig
        from electra_tf.data.vocab import special_token_ids
        from electra_tf.models.saving import save_pretrained
        from electra_tf.pretrain import ElectraPretrainer

        vocab = str(MINILM / "vocab.txt")
        out = {}
        for name in models:
            mdir = self.work / name
            if name == "small" and not (mdir / "config.json").exists():
                keras.utils.set_random_seed(seed)
                config = ElectraConfig.from_json(str(ROOT / "configs" / "small.json")).replace(max_seq_length=256)
                pretrainer = ElectraPretrainer(config, special_token_ids(vocab))
                save_pretrained(str(mdir), pretrainer, vocab)
            elif name == "minilm" and not (mdir / "config.json").exists():
                _run([sys.executable, "-m", "electra_tf.convert", "--from", "hf", "--input", str(MINILM),
                      "--output_dir", str(mdir)])
            hf = self.work / f"{name}_hf"
            if not (hf / "discriminator" / "config.json").exists():
                _run([sys.executable, "-m", "electra_tf.convert", "--from", "electra_tf", "--input", str(mdir),
                      "--to", "hf", "--output_dir", str(hf)])
            out[name] = {"model_dir": str(mdir), "hf_dir": str(hf / "discriminator"), "vocab": vocab}
        return out

    def make_classifier(self, name, model_dir, seq, seed, precision="fp32"):
        """A ClassifierModel on `model_dir`'s encoder with a seeded head; saved as a seed dir."""
        import keras
        import numpy as np

        from electra_tf.finetune.modeling.classifier_dir import save_classifier
        from electra_tf.finetune.modeling.task_models import ClassifierModel, build_and_call
        from electra_tf.models.saving import load_encoder

        keras.utils.set_random_seed(seed)
        encoder, config = load_encoder(model_dir)
        model = ClassifierModel(encoder, 2, False, config.hidden_dropout_prob, config.initializer_range,
                                False, pooling="cls")
        build_and_call(model, seq)
        rng = np.random.default_rng(seed + 1)
        kernel = rng.normal(0, 0.5, model.head.out.kernel.shape).astype("float32")  # logits that vary
        model.head.out.kernel.assign(kernel)
        seed_dir = self.work / f"{name}_seed"
        save_classifier(str(seed_dir), model, config, str(Path(model_dir) / "vocab.txt"), LABELS, "imdb",
                        False, seq)
        np.savez(self.work / f"{name}_head.npz", kernel=model.head.out.kernel.numpy(),
                 bias=model.head.out.bias.numpy())
        from electra_tf.export import export

        saved = self.work / f"{name}_saved_model"
        if not (saved / "saved_model.pb").exists():
            export(str(seed_dir), str(saved), kind="classifier")
        return {"seed_dir": str(seed_dir), "saved_model": str(saved), "head": str(self.work / f"{name}_head.npz")}

    def tokenize(self, vocab, texts, seq):
        """Ids of `texts` cut to `seq` (unpadded lengths too), with our in-graph tokenizer."""
        from electra_tf.preprocessing import TextPreprocessor

        pre = TextPreprocessor(vocab, seq, do_lower_case=True)
        enc = pre(self.tf.constant(texts), pad_to_sequence_length=True)
        ids = enc["input_ids"].numpy()
        mask = enc["input_mask"].numpy()
        return ids, mask, mask.sum(1)

    def tokenize_to(self, vocab, texts, seq, path, labels):
        """Writes the fine-tuning batches' ids (padded to `seq`) and labels to `path` (.npz)."""
        import numpy as np

        ids, mask, lengths = self.tokenize(vocab, texts, seq)
        np.savez(path, ids=ids.astype("int32"), mask=mask.astype("int32"), labels=np.asarray(labels, "int32"))
        return {"mean_length": float(lengths.mean()), "cut_at_max": float((lengths >= seq).mean())}

    # ---------------------------------------------------------------- cases
    def prepare(self, case):
        kind = case["kind"]
        if kind == "ft":
            self.cases[case["id"]] = self._prepare_ft(case)
        elif kind == "infer":
            self.cases[case["id"]] = self._prepare_infer(case)
        return {"prepared": case["id"]}

    def _prepare_ft(self, case):
        import keras
        import numpy as np

        from electra_tf.finetune.modeling.task_models import ClassifierModel, build_and_call
        from electra_tf.finetune.settings import Settings
        try:  # fine-tuning's optimizer, wherever the fine-tuning package keeps it
            from electra_tf.finetune.training_setup import make_optimizer
        except ImportError:
            from electra_tf.finetune.training_loop import make_optimizer
        from electra_tf.models.saving import load_encoder

        keras.utils.set_random_seed(0)
        seq = case["seq"]
        encoder, config = load_encoder(case["model_dir"])
        model = ClassifierModel(encoder, 2, False, config.hidden_dropout_prob, config.initializer_range, False,
                                pooling="cls")
        build_and_call(model, seq)
        head = np.load(case["head"])
        model.head.out.kernel.assign(head["kernel"])
        model.head.out.bias.assign(head["bias"])
        s = Settings(task="imdb", init=case["model_dir"], data_dir=None, output_dir=str(self.work),
                     jit_compile=case["xla"], clip_norm=CLIP, weight_decay=WEIGHT_DECAY)
        opt, _ = make_optimizer(model, encoder, s, LR, 0.8, 10000)
        model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=case["xla"])
        data = np.load(case["batches"])
        ids, mask, labels = data["ids"], data["mask"], data["labels"]
        lengths = mask.sum(1)
        batches = []
        for idx, width in length_batches(lengths, case["batch"], case["mode"]):
            if case["mode"] == "fixed":
                width = seq
            else:
                width = min(seq, -(-width // case["round_to"]) * case["round_to"])
            x = {"input_ids": ids[idx, :width], "input_mask": mask[idx, :width],
                 "segment_ids": np.zeros_like(ids[idx, :width])}
            batches.append((x, labels[idx]))
        state = {"model": model, "batches": batches, "next": 0, "batch": case["batch"]}
        # Warm-up: every distinct width once (traces, XLA compiles), then two more steps.
        t0 = time.perf_counter()
        seen = set()
        for x, y in batches:
            w = x["input_ids"].shape[1]
            if w not in seen:
                seen.add(w)
                model.train_on_batch(x, y)
        for _ in range(2):
            self._ft_step(state)
        state["warmup_s"] = time.perf_counter() - t0
        state["widths"] = sorted(seen)
        return state

    def _ft_step(self, state):
        x, y = state["batches"][state["next"] % len(state["batches"])]
        state["next"] += 1
        t = time.perf_counter()
        logs = state["model"].train_on_batch(x, y, return_dict=True)
        float(logs["loss"])
        return time.perf_counter() - t, int(x["input_mask"].sum()), x["input_ids"].size

    def _prepare_infer(self, case):
        tf = self.tf
        variant = case["variant"]
        state = {"variant": variant}
        if variant == "saved_model":
            fn = tf.saved_model.load(case["saved_model"]).signatures["serving_default"]
            state["call"] = lambda texts: fn(text=tf.constant(texts))["label_id"].numpy()
            state["logits"] = lambda texts: fn(text=tf.constant(texts))["logits"].numpy()
        elif variant in ("predictor", "predictor_input_order"):
            from electra_tf.predict import Predictor

            p = Predictor(case["saved_model"], batch_size=case["batch"],
                          sort_by_length=(variant == "predictor"))
            state["predictor"] = p
            state["call"] = lambda texts: p.predict_arrays(texts)["label_id"]
            state["logits"] = None
        elif variant == "bf16":
            import keras

            from electra_tf.export.serving_loader import classifier_module

            keras.mixed_precision.set_global_policy("mixed_bfloat16")
            try:
                module = classifier_module(case["seed_dir"])
            finally:
                keras.mixed_precision.set_global_policy("float32")
            state["call"] = lambda texts: module.serve(tf.constant(texts))["label_id"].numpy()
            state["logits"] = lambda texts: module.serve(tf.constant(texts))["logits"].numpy()
        else:
            raise ValueError(variant)
        return warm_up(state, case)

    def run(self, cid, what):
        return run_case(self, cid, what)


def warm_up(state, case):
    """Four batches and four single texts before timing (traces, caches); records the seconds."""
    t0 = time.perf_counter()
    texts = case["texts"]
    for start in range(0, min(len(texts), 4 * case["batch"]), case["batch"]):
        state["call"](texts[start:start + case["batch"]])
    for text in texts[:4]:
        state["call"]([text])
    state["warmup_s"] = time.perf_counter() - t0
    return state


def run_case(side, cid, what):
    """One timed round of a prepared case (shared by both sides)."""
    state = side.cases[cid]
    if what["kind"] == "ft":
        times, real, padded = [], 0, 0
        for _ in range(what["steps"]):
            t, r, p = side._ft_step(state)
            times.append(t)
            real += r
            padded += p
        return {"times": times, "real_tokens": real, "padded_tokens": padded, "examples": state["batch"] * len(times)}
    texts = what["texts"]
    if what["kind"] == "throughput":
        t = time.perf_counter()
        if state.get("predictor") is not None:
            state["call"](texts)  # Predictor batches itself
        else:
            for start in range(0, len(texts), what["batch"]):
                state["call"](texts[start:start + what["batch"]])
        return {"seconds": time.perf_counter() - t, "reviews": len(texts)}
    if what["kind"] == "latency":
        lat = []
        for text in texts:
            t = time.perf_counter()
            state["call"]([text])
            lat.append(time.perf_counter() - t)
        return {"latencies": lat}
    if what["kind"] == "logits":
        fn = state.get("logits")
        if fn is None:
            return {"logits": None}
        rows = []
        for start in range(0, len(texts), what["batch"]):
            rows.extend(fn(texts[start:start + what["batch"]]).tolist())
        return {"logits": rows}
    raise ValueError(what["kind"])


# ============================================================================ worker: peers (PyTorch, ONNX Runtime)
class Peers:
    """Hugging Face transformers on PyTorch eager, and ONNX Runtime, in --peer_python."""

    def __init__(self, work: Path):
        import torch

        torch.set_num_threads(THREADS)
        torch.set_num_interop_threads(THREADS)
        self.torch = torch
        self.work = work
        self.cases = {}
        self.models = {}

    def _classifier(self, hf_dir, head_npz, dropout=0.1):
        import numpy as np
        import torch
        from transformers import ElectraModel

        class Classifier(torch.nn.Module):
            """ElectraModel + the reference head: dropout, then a dense layer on the [CLS] vector."""

            def __init__(self):
                super().__init__()
                self.encoder = ElectraModel.from_pretrained(hf_dir, attn_implementation="sdpa")
                h = self.encoder.config.hidden_size
                self.dropout = torch.nn.Dropout(dropout)
                self.out = torch.nn.Linear(h, 2)
                head = np.load(head_npz)
                with torch.no_grad():
                    self.out.weight.copy_(torch.from_numpy(head["kernel"].T.copy()))
                    self.out.bias.copy_(torch.from_numpy(head["bias"]))

            def forward(self, input_ids, attention_mask, token_type_ids):
                hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                      token_type_ids=token_type_ids).last_hidden_state
                return self.out(self.dropout(hidden[:, 0]))

        return Classifier()

    def _tokenizer(self, hf_dir):
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(hf_dir)  # the Rust `tokenizers` WordPiece, as users load it
        assert tok.is_fast, type(tok)
        return tok

    def prepare(self, case):
        if case["kind"] == "ft":
            self.cases[case["id"]] = self._prepare_ft(case)
        else:
            self.cases[case["id"]] = self._prepare_infer(case)
        return {"prepared": case["id"]}

    def _prepare_ft(self, case):
        import numpy as np
        import torch

        torch.manual_seed(0)
        model = self._classifier(case["hf_dir"], case["head"])
        model.train()
        no_decay = [p for n, p in model.named_parameters() if "LayerNorm" in n or n.endswith("bias")]
        decay = [p for n, p in model.named_parameters() if not ("LayerNorm" in n or n.endswith("bias"))]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=LR, eps=EPS)
        data = np.load(case["batches"])
        ids, mask, labels = data["ids"], data["mask"], data["labels"]
        batches = []
        for idx, width in length_batches(mask.sum(1), case["batch"], case["mode"]):
            width = case["seq"] if case["mode"] == "fixed" else width
            batches.append((torch.from_numpy(ids[idx, :width].astype(np.int64)),
                            torch.from_numpy(mask[idx, :width].astype(np.int64)),
                            torch.from_numpy(labels[idx].astype(np.int64))))
        state = {"model": model, "opt": opt, "batches": batches, "next": 0, "batch": case["batch"]}
        t0 = time.perf_counter()
        for _ in range(2):
            self._ft_step(state)
        state["warmup_s"] = time.perf_counter() - t0
        return state

    def _ft_step(self, state):
        torch = self.torch
        ids, mask, labels = state["batches"][state["next"] % len(state["batches"])]
        state["next"] += 1
        model, opt = state["model"], state["opt"]
        t = time.perf_counter()
        logits = model(ids, mask, torch.zeros_like(ids))
        loss = torch.nn.functional.cross_entropy(logits, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        float(loss)
        return time.perf_counter() - t, int(mask.sum()), ids.numel()

    def _onnx(self, case, quantize):
        """The PyTorch classifier exported to ONNX (dynamic batch and length), optionally int8."""
        torch = self.torch
        path = self.work / f"{case['model']}_{case['seq']}.onnx"
        if not path.exists():
            model = self._classifier(case["hf_dir"], case["head"]).eval()
            ids = torch.ones(2, 16, dtype=torch.int64)
            with torch.no_grad():
                torch.onnx.export(model, (ids, ids, torch.zeros_like(ids)), str(path),
                                  input_names=["input_ids", "attention_mask", "token_type_ids"],
                                  output_names=["logits"], dynamo=False, opset_version=17,
                                  dynamic_axes={k: {0: "batch", 1: "seq"} for k in
                                                ("input_ids", "attention_mask", "token_type_ids")}
                                  | {"logits": {0: "batch"}})
        if quantize:
            qpath = path.with_suffix(".int8.onnx")
            if not qpath.exists():
                from onnxruntime.quantization import QuantType, quantize_dynamic

                quantize_dynamic(str(path), str(qpath), weight_type=QuantType.QInt8)
            path = qpath
        return path

    def _prepare_infer(self, case):
        import numpy as np
        import torch

        variant = case["variant"]
        tok = self._tokenizer(case["hf_dir"])
        seq = case["seq"]

        def encode(texts, tensors):
            return tok(texts, padding="longest", truncation=True, max_length=seq, return_tensors=tensors,
                       return_token_type_ids=True)

        state = {"variant": variant}
        if variant in ("torch", "torch_bf16"):
            model = self._classifier(case["hf_dir"], case["head"]).eval()
            bf16 = variant == "torch_bf16"

            def logits(texts):
                enc = encode(texts, "pt")
                with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    return model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).float().numpy()
        else:
            import onnxruntime as ort

            path = self._onnx(case, quantize=variant == "ort_int8")
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = THREADS
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            state["onnx"] = str(path)

            def logits(texts):
                enc = encode(texts, "np")
                feeds = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
                return sess.run(["logits"], feeds)[0]

        state["logits"] = logits
        state["call"] = lambda texts: logits(texts).argmax(-1)
        return warm_up(state, case)

    def run(self, cid, what):
        return run_case(self, cid, what)


def _run(cmd):
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def worker_main(side: str, work: str):
    """JSON lines on stdin -> JSON lines on stdout; logs go to stderr."""
    out = sys.stdout
    sys.stdout = sys.stderr  # library prints must not corrupt the protocol
    impl = (Ours if side == "ours" else Peers)(Path(work))
    versions = {}
    if side == "ours":
        import keras
        import tensorflow as tf

        versions = {"tensorflow": tf.__version__, "keras": keras.__version__}
    else:
        import onnxruntime
        import torch
        import transformers

        versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                    "onnxruntime": onnxruntime.__version__}
    out.write(json.dumps({"ready": True, "versions": versions}) + "\n")
    out.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            cmd = msg.pop("cmd")
            if cmd == "quit":
                reply = {"peak_rss_bytes": rss_bytes()}
            elif cmd == "call":
                reply = {"result": getattr(impl, msg["method"])(*msg.get("args", []))}
            elif cmd == "prepare":
                reply = impl.prepare(msg["case"])
                reply["warmup_s"] = impl.cases[msg["case"]["id"]].get("warmup_s")
                for key in ("widths", "onnx"):
                    if key in impl.cases[msg["case"]["id"]]:
                        reply[key] = impl.cases[msg["case"]["id"]][key]
            elif cmd == "drop":
                impl.cases.pop(msg["id"], None)
                import gc

                gc.collect()
                reply = {"dropped": msg["id"]}
            elif cmd == "run":
                reply = impl.run(msg["id"], msg["what"])
            else:
                reply = {"error": f"unknown command {cmd}"}
        except Exception as e:  # noqa: BLE001  (reported to the driver, which stops)
            import traceback

            traceback.print_exc()
            reply = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
        if cmd == "quit":
            return


# ============================================================================ driver
class Worker:
    def __init__(self, side, python, work, log):
        env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2",
                   OMP_NUM_THREADS=str(THREADS), TOKENIZERS_PARALLELISM="false")
        self.side = side
        self.proc = subprocess.Popen([python, str(Path(__file__).resolve()), "--worker", side, "--work", str(work)],
                                     cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, text=True)
        self.info = self._read()

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.side} worker died; see its log")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.side} worker: {reply['error']}")
        return reply

    def send(self, **msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def call(self, method, *args):
        return self.send(cmd="call", method=method, args=list(args))["result"]

    def close(self):
        try:
            reply = self.send(cmd="quit")
        except (RuntimeError, BrokenPipeError):
            reply = {}
        self.proc.wait(timeout=60)
        return reply


def _ints(text):
    return [int(x) for x in str(text).split(",") if x]


def load():
    return [round(x, 2) for x in os.getloadavg()]


def interleave(entries, rounds, make_what, log):
    """Runs every (worker, case id) once per round, the order reversed every other round.

    Returns {case id: [round results]} and the per-round load averages."""
    results = {cid: [] for _, cid, _ in entries}
    loads = []
    for r in range(rounds):
        order = entries if r % 2 == 0 else list(reversed(entries))
        before = load()
        for worker, cid, label in order:
            res = worker.send(cmd="run", id=cid, what=make_what(cid))
            if "error" in res:
                raise RuntimeError(f"{label}: {res['error']}")
            results[cid].append(res)
        loads.append({"round": r, "before": before, "after": load()})
        log(f"    round {r + 1}/{rounds} done, load {before} -> {loads[-1]['after']}")
    return results, loads


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work_dir", default=str(ROOT / "runs" / "bench_cpu_tasks"),
                   help="models, exports and logs (reused when present)")
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--peer_python", default=str(ROOT / ".venv-peers" / "bin" / "python"),
                   help="python of the peers' venv (scripts/benchmarks/setup_cpu_peers.sh); "
                        "sys.executable works if this venv has torch, transformers and onnxruntime")
    p.add_argument("--models", default="small,minilm", help="small (ELECTRA-Small shape) and/or minilm")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=3, help="fine-tuning steps per round and side")
    p.add_argument("--ft_seqs", default="128,256", help="fine-tuning sequence lengths")
    p.add_argument("--infer_seq", type=int, default=256, help="max_seq_length of the classifiers served")
    p.add_argument("--throughput_reviews", type=int, default=128, help="reviews per throughput round (batch 32)")
    p.add_argument("--latency_reviews", type=int, default=24, help="single reviews per latency round")
    p.add_argument("--no_xla", action="store_true", help="skip our XLA fine-tuning step")
    p.add_argument("--xla_seqs", default="128", help="fine-tuning lengths to measure our XLA step at "
                                                     "(each compile takes a minute or more)")
    p.add_argument("--bucket_seqs", default="256", help="fine-tuning lengths to measure length buckets at")
    p.add_argument("--bucket_round_to", type=int, default=32,
                   help="length buckets pad to a multiple of this (fewer distinct shapes to trace)")
    p.add_argument("--ft_data", default="imdb", choices=["imdb", "sst2"],
                   help="fine-tuning text: IMDB reviews (long) or GLUE SST-2 sentences (short)")
    p.add_argument("--no_finetune", action="store_true")
    p.add_argument("--no_inference", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: ELECTRA-Small only, seq 128, 1 round, 1 step, no XLA, few reviews")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--worker", choices=["ours", "peers"], help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main(args.worker, args.work)
    if args.quick:
        args.models, args.rounds, args.steps, args.ft_seqs, args.no_xla = "small", 1, 1, "128", True
        args.bucket_seqs = "128"
        args.throughput_reviews, args.latency_reviews, args.infer_seq = 32, 4, 128
    if not Path(args.peer_python).exists():
        sys.exit(f"{args.peer_python} not found: run bash scripts/benchmarks/setup_cpu_peers.sh first "
                 f"(or pass --peer_python)")
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.time()

    def log(msg):
        print(f"[{time.time() - t_start:6.0f}s] {msg}", flush=True)

    models = [m for m in args.models.split(",") if m]
    ft_seqs = [int(s) for s in args.ft_seqs.split(",") if s]
    result = {"machine": machine(), "command": " ".join([Path(sys.argv[0]).name] + (argv or sys.argv[1:])),
              "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": load(),
              "threads": THREADS, "rounds": args.rounds, "finetune": [], "inference": [], "agreement": []}
    with open(work / "ours.log", "w") as ours_log, open(work / "peers.log", "w") as peers_log:
        ours = Worker("ours", sys.executable, work, ours_log)
        peers = Worker("peers", args.peer_python, work, peers_log)
        result["versions"] = {"ours": ours.info["versions"], "peers": peers.info["versions"]}
        log(f"workers up: {result['versions']}")
        paths = ours.call("make_models", args.seed, models)
        infer_texts, _ = read_reviews("dev", max(args.throughput_reviews, args.latency_reviews, 64))
        n_ft = 32 * 8
        ft_texts, ft_labels = read_sst2(n_ft) if args.ft_data == "sst2" else read_reviews("train", n_ft)
        for name in models:
            paths[name].update(ours.call("make_classifier", name, paths[name]["model_dir"], args.infer_seq, args.seed))
            log(f"{name}: models written")
            if not args.no_finetune:
                for seq in ft_seqs:
                    result["finetune"].extend(bench_finetune(ours, peers, name, paths[name], seq, ft_texts,
                                                             ft_labels, args, work, log))
            if not args.no_inference:
                inf, agree = bench_inference(ours, peers, name, paths[name], infer_texts, args, log)
                result["inference"].extend(inf)
                result["agreement"].extend(agree)
        result["peak_rss_bytes"] = {"ours": ours.close().get("peak_rss_bytes"),
                                    "peers": peers.close().get("peak_rss_bytes")}
    result["load_end"] = load()
    result["wall_s"] = round(time.time() - t_start, 1)
    print(report(result))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        log(f"wrote {args.json}")
    return 0


def bench_finetune(ours, peers, name, paths, seq, texts, labels, args, work, log):
    batches = work / f"{name}_ft_{seq}.npz"
    stats = ours.call("tokenize_to", paths["vocab"], texts, seq, str(batches), labels)
    log(f"fine-tuning batches {name} seq {seq}: {stats}")
    # "ours" pads every batch to the maximum, as a fixed-shape pipeline does; "ours, longest row" is
    # what `finetune` does for one-label-per-text tasks (each batch cut to its longest row, rounded up to 16).
    variants = [(ours, "ours", False, "fixed"), (ours, "ours, longest row (finetune default)", False, "longest"),
                (peers, "pytorch eager", False, "fixed"), (peers, "pytorch eager, longest row", False, "longest")]
    if not args.no_xla and seq in _ints(args.xla_seqs):
        variants.append((ours, "ours XLA", True, "fixed"))
    if seq in _ints(args.bucket_seqs):
        variants += [(ours, "ours, length buckets", False, "bucket"),
                     (peers, "pytorch eager, length buckets", False, "bucket")]
    entries = []
    for worker, label, xla, mode in variants:
        cid = f"ft/{name}/{seq}/{label}"
        case = {"id": cid, "kind": "ft", "model_dir": paths["model_dir"], "hf_dir": paths["hf_dir"],
                "head": paths["head"], "seq": seq, "batch": 32, "xla": xla, "mode": mode,
                "batches": str(batches), "round_to": 16 if mode == "longest" else args.bucket_round_to}
        reply = worker.send(cmd="prepare", case=case)
        if "error" in reply:
            raise RuntimeError(f"{cid}: {reply['error']}")
        log(f"  prepared {cid} (warm-up {reply.get('warmup_s', 0):.0f} s{', widths ' + str(reply['widths']) if 'widths' in reply else ''})")
        entries.append((worker, cid, label))
    log(f"fine-tuning {name} seq {seq}: {len(entries)} cases x {args.rounds} rounds")
    res, loads = interleave(entries, args.rounds, lambda cid: {"kind": "ft", "steps": args.steps}, log)
    out = []
    for worker, cid, label in entries:
        rounds = res[cid]
        eps = [r["examples"] / sum(r["times"]) for r in rounds]
        out.append({"model": name, "seq": seq, "side": label, "examples_per_s": statistics.median(eps),
                    "rounds_examples_per_s": eps, "step_s": [t for r in rounds for t in r["times"]],
                    "padded_share": 1 - sum(r["real_tokens"] for r in rounds) / sum(r["padded_tokens"] for r in rounds),
                    "loads": loads})
        worker.send(cmd="drop", id=cid)
    return out


def bench_inference(ours, peers, name, paths, texts, args, log):
    ours_variants = ["saved_model", "predictor", "predictor_input_order", "bf16"]
    peer_variants = ["torch", "torch_bf16", "ort", "ort_int8"]
    labels = {"saved_model": "ours SavedModel", "predictor": "ours Predictor (length-sorted)",
              "predictor_input_order": "ours Predictor (input order)", "bf16": "ours bf16",
              "torch": "pytorch eager", "torch_bf16": "pytorch eager bf16", "ort": "onnxruntime",
              "ort_int8": "onnxruntime int8"}
    entries = []
    for worker, variant in [(ours, v) for v in ours_variants] + [(peers, v) for v in peer_variants]:
        cid = f"infer/{name}/{variant}"
        case = {"id": cid, "kind": "infer", "variant": variant, "model": name, "seq": args.infer_seq, "batch": 32,
                "saved_model": paths["saved_model"], "seed_dir": paths["seed_dir"], "hf_dir": paths["hf_dir"],
                "head": paths["head"], "texts": texts[:64]}
        reply = worker.send(cmd="prepare", case=case)
        if "error" in reply:
            raise RuntimeError(f"{cid}: {reply['error']}")
        log(f"  prepared {cid} (warm-up {reply.get('warmup_s', 0):.1f} s)")
        entries.append((worker, cid, labels[variant]))
    # Agreement on the same reviews: logits of every side against our SavedModel's.
    agree = []
    ref = None
    for worker, cid, label in entries:
        logits = worker.send(cmd="run", id=cid, what={"kind": "logits", "texts": texts[:64], "batch": 32})["logits"]
        if logits is None:
            continue
        if ref is None:
            ref = logits
            continue
        diff = max(abs(a - b) for ra, rb in zip(ref, logits) for a, b in zip(ra, rb))
        same = sum(int(ra.index(max(ra)) == rb.index(max(rb))) for ra, rb in zip(ref, logits))
        agree.append({"model": name, "side": label, "max_abs_logit_diff_vs_ours": diff,
                      "same_label": f"{same}/{len(ref)}"})
    log(f"inference {name}: throughput, {len(entries)} cases x {args.rounds} rounds")
    tp, tp_loads = interleave(entries, args.rounds,
                              lambda cid: {"kind": "throughput", "texts": texts[:args.throughput_reviews], "batch": 32},
                              log)
    lat_entries = [e for e in entries if "predictor" not in e[1]]
    log(f"inference {name}: latency at batch 1")
    lat, lat_loads = interleave(lat_entries, args.rounds,
                                lambda cid: {"kind": "latency", "texts": texts[:args.latency_reviews]}, log)
    out = []
    for worker, cid, label in entries:
        rps = [r["reviews"] / r["seconds"] for r in tp[cid]]
        row = {"model": name, "seq": args.infer_seq, "side": label, "reviews_per_s": statistics.median(rps),
               "rounds_reviews_per_s": rps, "loads": tp_loads}
        if cid in lat:
            # p50: median over rounds of each round's median; p99 over all single calls.
            lats = [x for r in lat[cid] for x in r["latencies"]]
            row["p50_ms"] = 1000 * statistics.median(statistics.median(r["latencies"]) for r in lat[cid])
            row["p99_ms"] = 1000 * percentile(lats, 99)
            row["latency_loads"] = lat_loads
        out.append(row)
        worker.send(cmd="drop", id=cid)
    return out, agree


def machine():
    model = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        flags = []
    return {"cpu": model, "cores": os.cpu_count(), "avx512_bf16": "avx512_bf16" in flags,
            "amx": any(f.startswith("amx") for f in flags), "python": platform.python_version()}


def report(result):
    lines = [f"machine: {result['machine']}  date: {result['date_utc']}  load at start {result['load_start']}"]
    ref = {}
    if result["finetune"]:
        lines.append("\nfine-tuning step, batch 32 (examples/s, median of rounds; ratio to pytorch eager)")
        for row in result["finetune"]:
            ref.setdefault((row["model"], row["seq"]), {})[row["side"]] = row["examples_per_s"]
        for row in result["finetune"]:
            base = ref[(row["model"], row["seq"])].get("pytorch eager")
            lines.append(f"  {row['model']:7s} seq {row['seq']:4d} {row['side']:32s} {row['examples_per_s']:7.2f} "
                         f"x{row['examples_per_s'] / base:5.2f}  padded {100 * row['padded_share']:4.1f}%")
    if result["inference"]:
        lines.append("\ninference, raw strings -> labels (reviews/s at batch 32; latency at batch 1)")
        base = {}
        for row in result["inference"]:
            base.setdefault(row["model"], {})[row["side"]] = row
        for row in result["inference"]:
            b = base[row["model"]]
            pt, ort = b["pytorch eager"]["reviews_per_s"], b["onnxruntime"]["reviews_per_s"]
            lat = (f"p50 {row['p50_ms']:7.1f} ms p99 {row['p99_ms']:7.1f} ms  p50/ort x{row['p50_ms'] / b['onnxruntime']['p50_ms']:4.2f}"
                   if "p50_ms" in row else "")
            lines.append(f"  {row['model']:7s} {row['side']:32s} {row['reviews_per_s']:7.2f}/s  x{row['reviews_per_s'] / pt:4.2f} pt "
                         f"x{row['reviews_per_s'] / ort:4.2f} ort  {lat}")
    for row in result["agreement"]:
        lines.append(f"  agreement {row['model']:7s} {row['side']:32s} max |dlogit| {row['max_abs_logit_diff_vs_ours']:.2e} "
                     f"same label {row['same_label']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
