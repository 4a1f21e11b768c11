"""Every ElectraConfig field is read by the code: a field that nothing reads is a setting
that silently does nothing (as attention_probs_dropout_prob and eval_batch_size once did)."""

import dataclasses
import os
import sys

import pytest

from electra_tf.config import OBJECTIVES, ElectraConfig

FIELDS = {f.name for f in dataclasses.fields(ElectraConfig)}
CONFIG_PY = os.path.abspath(sys.modules["electra_tf.config"].__file__)
PACKAGE = os.path.dirname(CONFIG_PY) + os.sep


@pytest.fixture
def reads(monkeypatch):
    """The set of config fields read by electra_tf code other than config.py itself
    (its validation and serialization do not count; its derived-size properties do,
    for whoever reads them)."""
    seen = set()
    original = ElectraConfig.__getattribute__

    def spy(self, name):
        if name in FIELDS:
            frame = sys._getframe(1)
            # Step out of the spy itself and of config.py's properties to the real reader.
            while frame is not None and (frame.f_code is spy.__code__ or (
                    os.path.abspath(frame.f_code.co_filename) == CONFIG_PY
                    and isinstance(getattr(ElectraConfig, frame.f_code.co_name, None), property))):
                frame = frame.f_back
            path = os.path.abspath(frame.f_code.co_filename) if frame is not None else ""
            if path.startswith(PACKAGE) and path != CONFIG_PY:
                seen.add(name)
        return original(self, name)

    monkeypatch.setattr(ElectraConfig, "__getattribute__", spy)
    return seen


def test_the_spy_sees_only_reads_outside_config_py(reads):
    ElectraConfig(hidden_size=64, num_attention_heads=2)  # validation reads every field
    assert reads == set()
    from electra_tf.models import build_encoder

    build_encoder(ElectraConfig(hidden_size=64, num_attention_heads=2, num_hidden_layers=1))
    assert {"hidden_size", "attention_probs_dropout_prob"} <= reads and "gen_weight" not in reads


@pytest.mark.large
def test_every_config_field_is_read_by_the_code(reads, job_data, tmp_path):
    from electra_tf import flops
    from electra_tf.data.vocab import special_token_ids
    from electra_tf.finetune.tasks.task_registry import get_task
    from electra_tf.finetune.finetune_job import resolve_init
    from electra_tf.finetune.settings import Settings
    from electra_tf.pretrain import ElectraPretrainer, create_optimizer
    from electra_tf.pretrain.__main__ import parse_args
    from electra_tf.pretrain.data_setup import make_inputs, split_job_batch
    from electra_tf.pretrain.options import validate_options

    # Pre-training: its options and data, one training step, every objective's networks and FLOPs.
    opts = parse_args(["--config", job_data["config"], "--data_dir", job_data["data_dir"],
                       "--eval_data_dir", job_data["eval_dir"], "--vocab_file", job_data["vocab_file"],
                       "--output_dir", str(tmp_path / "run"), "--strategy", "cpu",
                       "--override", f"vocab_size={job_data['vocab_size']}"])
    plan = validate_options(opts, log=lambda _: None)
    batch = split_job_batch(plan, opts, 1, "the CPU")
    inputs = make_inputs(plan, opts, strategy=None, batch=batch, worker="main", excluded=[], data_seed=0,
                         log=lambda _: None)
    special = special_token_ids(job_data["vocab_file"])
    model = ElectraPretrainer(plan.config, special)
    model.compile(optimizer=create_optimizer(plan.config, train_steps=10))
    model.train_on_batch(next(iter(inputs.train)))
    for objective in OBJECTIVES:
        config = plan.config.replace(objective=objective, two_stage_mlm_steps=5 * (objective == "two_stage"))
        ElectraPretrainer(config, special)
        flops.total_train_flops(config, 8, 10)
    # Fine-tuning: the encoder's config and the reference hyper-parameters for its size.
    settings = Settings(task="sst2", init="random", data_dir=None, output_dir=str(tmp_path / "ft"),
                        config=job_data["config"], vocab_file=job_data["vocab_file"])
    resolve_init(settings, get_task("sst2"))
    assert sorted(FIELDS - reads) == []
