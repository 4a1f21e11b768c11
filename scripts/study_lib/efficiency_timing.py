"""The efficiency study's `--time_steps`: wall and CPU time per pre-training step of each objective."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Dict

import numpy as np
import tensorflow as tf

from electra_tf.data.vocab import SpecialTokenIds
from electra_tf.pretrain import ElectraPretrainer, create_optimizer


def time_steps(args, config, study_entry: Callable, reset_keras: Callable, write_json: Callable,
               log: Callable) -> Dict:
    """Wall and CPU ms per pre-training step of each objective (sizes the default budgets).

    Synthetic batches of random ids over `--vocab_size`, so no data is needed.
    two_stage is timed in both phases.

    Args:
      args: the study's flags (objectives, seq_length, batch_size, time_steps, work_dir).
      config: the study's model config, its vocabulary `--vocab_size`.
      study_entry, reset_keras, write_json, log: the study script's helpers.
    """
    seq, batch = args.seq_length, args.batch_size
    rng = np.random.default_rng(0)
    ids = rng.integers(5, args.vocab_size, size=(8 * batch, seq)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 2, 3
    data = tf.data.Dataset.from_tensor_slices(
        {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    ).repeat().batch(batch, drop_remainder=True).prefetch(2)
    cases = []
    for objective in [o.strip() for o in args.objectives.split(",") if o.strip()]:
        if study_entry(objective)[0] == "two_stage":
            cases += [(f"{objective} (mlm phase)", objective, 10**9),
                      (f"{objective} (electra phase)", objective, 3)]
        else:
            cases.append((objective, objective, 0))
    times = {}
    for label, objective, k in cases:
        reset_keras()
        base, changes = study_entry(objective)
        cfg = config.replace(objective=base, two_stage_mlm_steps=k, **changes)
        model = ElectraPretrainer(cfg, SpecialTokenIds(0, 1, 2, 3, 4))
        model.compile(optimizer=create_optimizer(cfg))
        model.fit(data, epochs=1, steps_per_epoch=3, verbose=0, shuffle=False)  # compile + warm-up
        wall, cpu = time.time(), time.process_time()
        model.fit(data, epochs=1, steps_per_epoch=args.time_steps, verbose=0, shuffle=False)
        times[label] = {"wall_ms": 1000 * (time.time() - wall) / args.time_steps,
                        "cpu_ms": 1000 * (time.process_time() - cpu) / args.time_steps}
        log(f"{label}: {times[label]['wall_ms']:.0f} ms/step wall, "
             f"{times[label]['cpu_ms']:.0f} ms/step CPU")
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    write_json(work / "step_times.json", {"settings": vars(args), "times": times,
                                           "load_average": os.getloadavg()})
    return times
