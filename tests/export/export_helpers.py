"""Shared by the export tests: a tiny trained-looking model directory and classifier."""

import numpy as np

WORDS = """the a an of in on to and was is it cat dog sat ran mat house city river walked
quickly slowly he she they we said good bad new old big small red blue green man woman
child children school book books read ##s ##ed ##ing ##ly . , ! ? ' 猫 は
""".split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
VOCAB += [f"[unused{i}]" for i in range(100 - len(VOCAB))]

EDGE_TEXTS = [
    "The cat sat on the mat.",
    "",
    "the big dog ran to the river " * 1430,  # 10,010 characters
    "猫はマットの上に座った。Кошка сидела на коврике. القطة جلست",
    "   ",
    "x" * 10000,
]


def write_vocab(path):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    return str(path)


def tiny_config(**changes):
    from electra_tf.config import ElectraConfig

    values = dict(vocab_size=len(VOCAB), embedding_size=16, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=64, generator_hidden_size=0.5,
                  max_position_embeddings=64, max_seq_length=24, model_size="tiny")
    values.update(changes)
    return ElectraConfig(**values)


def make_model_dir(path, seed=0):
    import tensorflow as tf

    from electra_tf.data.vocab import special_token_ids
    from electra_tf.models.saving import save_pretrained
    from electra_tf.pretrain import ElectraPretrainer

    config = tiny_config()
    model = ElectraPretrainer(config, special_token_ids(VOCAB))
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(v + tf.constant(rng.normal(0, 0.1, v.shape).astype("float32")))
    vocab = write_vocab(str(path) + "_vocab.txt")
    save_pretrained(str(path), model, vocab)
    return str(path), model, config
