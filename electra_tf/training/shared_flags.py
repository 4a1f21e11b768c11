"""The flags pre-training and fine-tuning share: one definition, one spelling, one set of values.

    python -m electra_tf.pretrain ... --strategy mirrored --mixed_precision bf16 --jit_compile
    python -m electra_tf.finetune ... --strategy mirrored --mixed_precision bf16 --jit_compile

Both command lines call `define_shared_flags`, so `--help` shows these flags
identically in both (tests/test_shared_flags.py compares them). What differs
between the two jobs, and why, is named here and nowhere else:

  - `--strategy multi_worker` and `tpu` are pre-training's: fine-tuning runs
    in one process that writes every output, and refuses them in one line
    (`check_one_machine`). `--tpu` and `--collective_timeout_s`, which only
    those strategies read, are pre-training flags.
  - `--seed`: pre-training trains one model (`--seed 7`, default the config's
    seed); fine-tuning trains one model per seed and reports their median
    (`--seed 1,2,3`).
  - `--batch_size` is the global batch in both: examples per optimizer step
    over all replicas (a strategy splits it across them).
  - `--save_every` / `--log_every` left unset: 1000 / 100 steps; the embedded
    pre-training default (no --data_dir) uses 100 / 50, and pre-training logs
    at most once per checkpoint interval.
"""

from __future__ import annotations

from absl import flags

from electra_tf.training.distribution import STRATEGIES, StrategyError

SHARED_FLAGS = ("strategy", "num_cpu_devices", "mixed_precision", "jit_compile", "save_every", "log_every")

# --mixed_precision -> Keras dtype policy. Variables, logits and losses stay float32;
# fp16 trains with loss scaling (keras.optimizers.LossScaleOptimizer).
PRECISION_POLICIES = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}

# What a job that runs in one process accepts (fine-tuning).
ONE_MACHINE_STRATEGIES = ("auto", "cpu", "gpu", "mirrored")

DEFAULT_SAVE_EVERY = 1000
DEFAULT_LOG_EVERY = 100


def define_shared_flags(fv: flags.FlagValues = None) -> None:
    """Defines the shared flags on `fv` (default: absl's global FLAGS).

    Args:
      fv: the FlagValues to define them on.
    """
    fv = flags.FLAGS if fv is None else fv
    flags.DEFINE_enum("strategy", "auto", list(STRATEGIES),
                      "tf.distribute strategy. auto: tpu with --tpu, multi_worker when TF_CONFIG lists "
                      "several workers, mirrored on several GPUs, gpu on one, else cpu. multi_worker and "
                      "tpu: pre-training only.", flag_values=fv)
    flags.DEFINE_integer("num_cpu_devices", 0, "Split the CPU into N logical devices (to try "
                         "--strategy mirrored on a laptop).", flag_values=fv)
    flags.DEFINE_enum("mixed_precision", "none", list(PRECISION_POLICIES),
                      "Compute dtype: bf16 (mixed_bfloat16) or fp16 (mixed_float16 with loss scaling); "
                      "variables, logits and losses stay float32.", flag_values=fv)
    flags.DEFINE_bool("jit_compile", False, "XLA-compile the train step (use it on a GPU).", flag_values=fv)
    flags.DEFINE_integer("save_every", None, f"Checkpoint every N steps (default {DEFAULT_SAVE_EVERY}; 100 "
                         f"for the embedded pre-training default; 0: only at the end). Re-running the same "
                         f"command resumes from the last checkpoint.", flag_values=fv)
    flags.DEFINE_integer("log_every", None, f"Progress line every N steps (default {DEFAULT_LOG_EVERY}; 50 "
                         f"for the embedded pre-training default).", flag_values=fv)


def check_one_machine(strategy_name: str, job: str) -> None:
    """Refuses a strategy that spans several processes for a job that runs in one.

    Args:
      strategy_name: the resolved --strategy (see `distribution.resolve_name`).
      job: the job's name in the message (e.g. "fine-tuning").

    Raises:
      StrategyError: for multi_worker and tpu.
    """
    if strategy_name not in ONE_MACHINE_STRATEGIES:
        raise StrategyError(f"--strategy={strategy_name} is for pre-training; {job} runs in one process: "
                            f"choose one of {', '.join(ONE_MACHINE_STRATEGIES)}")
