"""The sample responses of docs/serving.md show what the default model's tokenizer makes
of the documented request.

The tokens depend only on the vocabulary, which `python -m electra_tf.pretrain` learns from the
sample corpus; the test learns it the same way (`prepare_embedded_default`, a few seconds) and runs
the texts of each documented request through the tokenizer the model serves with.
"""

import json
import re
from pathlib import Path

import pytest

from electra_tf.config import ElectraConfig
from electra_tf.preprocessing import TextPreprocessor
from electra_tf.pretrain.data_setup import prepare_embedded_default
from electra_tf.pretrain.options import DEFAULT_CONFIG

REPO = Path(__file__).resolve().parent.parent.parent


def documented_samples(doc: Path):
    """[(request texts, response predictions)] of each curl request followed by its ```json response."""
    text = doc.read_text(encoding="utf-8")
    samples = []
    for request in re.finditer(r"curl [^']*?:predict[^']*?-d '(.*?)'\n```", text, re.S):
        body = json.loads(request.group(1))
        response = re.search(r"```json\n(.*?)```", text[request.end():], re.S)
        samples.append(([row["text"] for row in body["instances"]], json.loads(response.group(1))["predictions"]))
    return samples


@pytest.fixture(scope="module")
def default_preprocessor(tmp_path_factory):
    config = ElectraConfig.from_json(DEFAULT_CONFIG)
    _, _, vocab_file = prepare_embedded_default(str(tmp_path_factory.mktemp("default_run")), config,
                                                log=lambda line: None)
    return TextPreprocessor(vocab_file, config.max_seq_length, do_lower_case=config.do_lower_case)


@pytest.mark.parametrize("doc", ["docs/serving.md"])
def test_documented_tokens_are_what_the_default_model_tokenizes(doc, default_preprocessor):
    samples = documented_samples(REPO / doc)
    assert samples, f"no curl request with a json response in {doc}"
    for texts, predictions in samples:
        assert len(predictions) == len(texts)
        packed = default_preprocessor(texts)
        tokens = default_preprocessor.id_to_token(packed["input_ids"]).numpy()
        mask = packed["input_mask"].numpy()
        for row, text in enumerate(texts):
            want = [t.decode("utf-8") for t, m in zip(tokens[row], mask[row]) if m]
            shown = predictions[row]
            assert [t for t in shown["tokens"] if t] == want, (doc, text)
            assert shown["input_mask"] == mask[row].tolist(), (doc, text)  # padded to the longest row
            assert len(shown["replaced_probs"]) == len(shown["tokens"]) == len(shown["text_mask"])
