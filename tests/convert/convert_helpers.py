"""Helpers for the conversion tests: real sentences, and an independent numpy
implementation of ELECTRA that reads reference (Google TF1) weight names.

The vocabulary and the tiny models are the shared ones (tests/helpers.py).
"""

import math
import os

import numpy as np

from helpers import VOCAB, random_pretrainer, tiny_config, write_vocab  # noqa: F401 (h.VOCAB, ...)

SENTENCES = [
    "The cat sat on the mat.",
    "She walked quickly to the old school, and he read books!",
    "They said the river was big and blue.",
]


def encode(sentences, max_len=32):
    """Real sentences -> padded ids with our fine-tuning tokenizer (a temporary vocab file)."""
    import tempfile

    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer, encode_classification

    with tempfile.TemporaryDirectory() as d:
        tok = FinetuneTokenizer(write_vocab(os.path.join(d, "vocab.txt")))
        batch = encode_classification(tok, sentences, None, max_len)
    # Trim to the longest row so padding is exercised but not dominant.
    n = int(batch["input_mask"].sum(1).max())
    return {k: v[:, :n] for k, v in batch.items()}


# ----------------------------------------------------------------------------- numpy reference
def _ln(x, g, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def np_encoder(w, prefix, emb_prefix, ids, mask, seg, heads):
    """The reference BERT/ELECTRA transformer written from the paper, on Google names."""
    x = (w[f"{emb_prefix}/word_embeddings"][ids] + w[f"{emb_prefix}/position_embeddings"][: ids.shape[1]][None]
         + w[f"{emb_prefix}/token_type_embeddings"][seg])
    x = _ln(x, w[f"{emb_prefix}/LayerNorm/gamma"], w[f"{emb_prefix}/LayerNorm/beta"])
    if f"{prefix}/embeddings_project/kernel" in w:
        x = x @ w[f"{prefix}/embeddings_project/kernel"] + w[f"{prefix}/embeddings_project/bias"]
    b, t, h = x.shape
    d = h // heads
    bias = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0
    i = 0
    while f"{prefix}/encoder/layer_{i}/attention/self/query/kernel" in w:
        p = f"{prefix}/encoder/layer_{i}"

        def proj(name, v):
            return v @ w[f"{p}/attention/self/{name}/kernel"] + w[f"{p}/attention/self/{name}/bias"]

        q, k, v = (proj(n, x).reshape(b, t, heads, d).transpose(0, 2, 1, 3) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, t, h)
        att = ctx @ w[f"{p}/attention/output/dense/kernel"] + w[f"{p}/attention/output/dense/bias"]
        x = _ln(att + x, w[f"{p}/attention/output/LayerNorm/gamma"], w[f"{p}/attention/output/LayerNorm/beta"])
        inter = _gelu(x @ w[f"{p}/intermediate/dense/kernel"] + w[f"{p}/intermediate/dense/bias"])
        out = inter @ w[f"{p}/output/dense/kernel"] + w[f"{p}/output/dense/bias"]
        x = _ln(out + x, w[f"{p}/output/LayerNorm/gamma"], w[f"{p}/output/LayerNorm/beta"])
        i += 1
    return x


def np_discriminator_logits(w, batch, heads):
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    h = np_encoder(w, "electra", "electra/embeddings", batch["input_ids"], batch["input_mask"],
                   batch["segment_ids"], heads)
    h = _gelu(h @ w["discriminator_predictions/dense/kernel"] + w["discriminator_predictions/dense/bias"])
    return (h @ w["discriminator_predictions/dense_1/kernel"] + w["discriminator_predictions/dense_1/bias"])[..., 0]


def np_generator_logits(w, batch, heads):
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    emb = "generator/embeddings" if "generator/embeddings/word_embeddings" in w else "electra/embeddings"
    h = np_encoder(w, "generator", emb, batch["input_ids"], batch["input_mask"], batch["segment_ids"], heads)
    h = _gelu(h @ w["generator_predictions/dense/kernel"] + w["generator_predictions/dense/bias"])
    h = _ln(h, w["generator_predictions/LayerNorm/gamma"], w["generator_predictions/LayerNorm/beta"])
    return h @ w[f"{emb}/word_embeddings"].T + w["generator_predictions/output_bias"]


def reference_weights(config, seed=0, untied=False):
    """Random weights under the reference names, sized by `config` (float32)."""
    rng = np.random.default_rng(seed)
    V, E, H, I = config.vocab_size, config.embedding_size, config.hidden_size, config.intermediate_size
    Hg, Ig = config.generator_hidden_dim, config.generator_intermediate_size
    w = {}

    def r(*shape, scale=0.2):
        return rng.normal(0, scale, shape).astype("float32")

    def embeddings(prefix):
        w[f"{prefix}/word_embeddings"] = r(V, E)
        w[f"{prefix}/position_embeddings"] = r(config.max_position_embeddings, E)
        w[f"{prefix}/token_type_embeddings"] = r(config.type_vocab_size, E)
        w[f"{prefix}/LayerNorm/gamma"] = 1 + r(E)
        w[f"{prefix}/LayerNorm/beta"] = r(E)

    def encoder(prefix, h, inter, layers):
        if E != h:
            w[f"{prefix}/embeddings_project/kernel"] = r(E, h)
            w[f"{prefix}/embeddings_project/bias"] = r(h)
        for i in range(layers):
            p = f"{prefix}/encoder/layer_{i}"
            for n in ("query", "key", "value"):
                w[f"{p}/attention/self/{n}/kernel"] = r(h, h)
                w[f"{p}/attention/self/{n}/bias"] = r(h)
            w[f"{p}/attention/output/dense/kernel"] = r(h, h)
            w[f"{p}/attention/output/dense/bias"] = r(h)
            for ln in (f"{p}/attention/output/LayerNorm", f"{p}/output/LayerNorm"):
                w[f"{ln}/gamma"] = 1 + r(h)
                w[f"{ln}/beta"] = r(h)
            w[f"{p}/intermediate/dense/kernel"] = r(h, inter)
            w[f"{p}/intermediate/dense/bias"] = r(inter)
            w[f"{p}/output/dense/kernel"] = r(inter, h)
            w[f"{p}/output/dense/bias"] = r(h)

    embeddings("electra/embeddings")
    encoder("electra", H, I, config.num_hidden_layers)
    w["discriminator_predictions/dense/kernel"] = r(H, H)
    w["discriminator_predictions/dense/bias"] = r(H)
    w["discriminator_predictions/dense_1/kernel"] = r(H, 1)
    w["discriminator_predictions/dense_1/bias"] = r(1)
    if untied:
        embeddings("generator/embeddings")
    encoder("generator", Hg, Ig, config.generator_num_layers)
    w["generator_predictions/dense/kernel"] = r(Hg, E)
    w["generator_predictions/dense/bias"] = r(E)
    w["generator_predictions/LayerNorm/gamma"] = 1 + r(E)
    w["generator_predictions/LayerNorm/beta"] = r(E)
    w["generator_predictions/output_bias"] = r(V)
    return w


def save_tf1_checkpoint(weights, prefix, with_optimizer_slots=True):
    """Writes `weights` the way the reference does: tf.compat.v1 variables and a Saver."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        variables = []
        for name, value in weights.items():
            variables.append(tf.compat.v1.get_variable(name, initializer=tf.constant(value)))
            if with_optimizer_slots:  # AdamWeightDecayOptimizer's slots
                for slot in ("adam_m", "adam_v"):
                    variables.append(tf.compat.v1.get_variable(
                        f"{name}/{slot}", initializer=tf.zeros_like(tf.constant(value))))
        if with_optimizer_slots:
            variables.append(tf.compat.v1.train.get_or_create_global_step())
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return saver.save(sess, prefix)


def model_batch(config):
    return encode(SENTENCES, config.max_seq_length)


def ours_discriminator_logits(model_dir, batch):
    from electra_tf.models.saving import load_discriminator

    encoder, head, _ = load_discriminator(model_dir)
    return head(encoder(batch)).numpy()


def ours_generator_logits(model_dir, batch):
    from electra_tf.pretrain.pretrainer_loading import load_pretrainer

    pretrainer = load_pretrainer(model_dir)
    encoder, head = pretrainer.generator, pretrainer.generator_head
    b, t = batch["input_ids"].shape
    positions = np.tile(np.arange(t), (b, 1)).astype("int32")
    return head(encoder(batch), mask_positions=positions).numpy()
