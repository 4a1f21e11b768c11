"""A run sized by wall-clock minutes instead of steps (`pretrain --train_minutes`).

A machine lent for minutes (a Colab session, a preemptible or borrowed GPU) gives a time, not a
step count, and the speed is only known once the first step has compiled. `TimeBudget` measures
the step rate for a short window after that first step, picks the last step that fits in the
minutes left, and hands it to `on_decided` once: the job moves its learning-rate decay there
(`WarmupPolynomialDecay(adjustable=True)`) and ends training at it, so the rate reaches 0 on the
last step as in a run of fixed length. If training still runs past the deadline (a slower stretch,
an evaluation), it is stopped at the next step and `on_decided` hears the earlier end.

The budget counts from the first `on_train_begin`, so the compile is inside it.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

import keras


class TimeBudget(keras.callbacks.Callback):
    """Decides a run's last step from its measured speed, once, and stops at a hard deadline.

    Args:
      minutes: wall-clock minutes for training, the first step's compile included.
      max_steps: the step the run may not pass (the job's `train_steps`).
      on_decided: function(end_step, steps_per_second or None) called when the end is decided, and
        again if the deadline cuts training shorter (with None); it must make the training loop
        stop at `end_step` (the trainer's `TrainingCallback.train_steps`).
      measure_seconds: the measuring window after the first step (default: a tenth of the budget,
        at most 30 s).
      step_multiple: the end falls on a multiple of this (`steps_per_execution`: Keras runs that
        many steps per call, so training can only stop between them).
      clock: time source (tests).

    Example:

    >>> budget = TimeBudget(0.5, max_steps=1000, on_decided=lambda end, rate: None)
    >>> round(budget.measure_seconds, 1)
    3.0
    """

    def __init__(self, minutes: float, max_steps: int, on_decided: Callable[[int, Optional[float]], None],
                 measure_seconds: Optional[float] = None, step_multiple: int = 1,
                 clock: Callable[[], float] = time.time):
        super().__init__()
        self.budget_seconds = float(minutes) * 60.0
        self.max_steps = int(max_steps)
        self.on_decided = on_decided
        self.measure_seconds = (min(30.0, 0.1 * self.budget_seconds) if measure_seconds is None
                                else float(measure_seconds))
        self.step_multiple = max(1, int(step_multiple))
        self.clock = clock
        self.started: Optional[float] = None
        self.compiled_at: Optional[float] = None  # end of the first step (its compile included)
        self.compiled_step: Optional[int] = None
        self.end_step: Optional[int] = None
        self.steps_per_second: Optional[float] = None
        self.cut_short = False

    @property
    def compile_seconds(self) -> Optional[float]:
        """Seconds from the start of training to the end of its first step."""
        return None if self.compiled_at is None else self.compiled_at - self.started

    def decision(self) -> dict:
        """What was decided, for the run's records (None before the measuring window ends)."""
        return {"end_step": self.end_step, "steps_per_second": self.steps_per_second,
                "first_step_seconds": self.compile_seconds, "cut_short": self.cut_short}

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def on_train_begin(self, logs=None):
        if self.started is None:  # the trainer may call fit more than once: the first start counts
            self.started = self.clock()

    def on_train_batch_end(self, batch, logs=None):
        now, step = self.clock(), self._step()
        deadline = self.started + self.budget_seconds
        if self.compiled_at is None:
            self.compiled_at, self.compiled_step = now, step
        elif self.end_step is None and (now - self.compiled_at >= self.measure_seconds or now >= deadline):
            self.steps_per_second = (step - self.compiled_step) / max(now - self.compiled_at, 1e-9)
            fits = int(self.steps_per_second * max(deadline - now, 0.0))
            fits -= fits % self.step_multiple
            self.end_step = max(step, min(self.max_steps, step + fits))
            self.on_decided(self.end_step, self.steps_per_second)
            return
        if self.end_step is not None and step < self.end_step and now >= deadline:
            self.end_step, self.cut_short = step, True
            self.on_decided(step, None)
