"""`TimeBudget` (a run sized by minutes) and the adjustable learning-rate schedule it moves."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.training.optimization import WarmupPolynomialDecay
from electra_tf.training.time_budget import TimeBudget


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class FakeModel:
    """What TimeBudget reads of a model: the optimizer's step counter."""

    def __init__(self):
        self.optimizer = type("Optimizer", (), {})()
        self.optimizer.iterations = tf.Variable(0, dtype=tf.int64)


def drive(budget, clock, model, seconds_per_step, first_step_seconds, steps):
    """Runs `steps` fake steps: the first takes `first_step_seconds` (compile), the rest each the same."""
    budget.set_model(model)
    budget.on_train_begin()
    for i in range(steps):
        clock.now += first_step_seconds if i == 0 else seconds_per_step
        model.optimizer.iterations.assign_add(1)
        budget.on_train_batch_end(i)
        if budget.end_step is not None and int(model.optimizer.iterations.numpy()) >= budget.end_step:
            break


def test_the_end_is_what_the_measured_rate_reaches_by_the_deadline():
    clock, model, decided = FakeClock(), FakeModel(), []
    # 10 minutes; the first step compiles for 120 s, then 1/16 s a step; measured for 30 s.
    budget = TimeBudget(10, max_steps=100_000, on_decided=lambda end, rate: decided.append((end, rate)), clock=clock)
    assert budget.measure_seconds == 30.0
    drive(budget, clock, model, 0.0625, 120.0, 100_000)
    # Decided at step 1 + 480 (30 s at 16 steps/s), 150 s after the start: 450 s left -> 7,200 more steps.
    (end, rate), = decided
    assert rate == pytest.approx(16.0)
    assert end == 481 + 7_200
    assert int(model.optimizer.iterations.numpy()) == end
    assert budget.compile_seconds == pytest.approx(120.0)
    assert not budget.cut_short


def test_the_end_falls_on_an_execution_boundary():
    clock, model, decided = FakeClock(), FakeModel(), []
    budget = TimeBudget(10, max_steps=100_000, on_decided=lambda end, rate: decided.append(end),
                        step_multiple=100, clock=clock)
    drive(budget, clock, model, 0.0625, 120.0, 100_000)
    assert decided == [481 + 7_200]  # 7,200 more steps is already a multiple of 100
    clock2, model2, decided2 = FakeClock(), FakeModel(), []
    budget = TimeBudget(10, max_steps=100_000, on_decided=lambda end, rate: decided2.append(end),
                        step_multiple=128, clock=clock2)
    drive(budget, clock2, model2, 0.0625, 120.0, 100_000)
    assert decided2 == [481 + 7_168]  # 7,200 rounded down to 56 x 128


def test_max_steps_bounds_the_end():
    clock, model, decided = FakeClock(), FakeModel(), []
    budget = TimeBudget(10, max_steps=1_000, on_decided=lambda end, rate: decided.append(end), clock=clock)
    drive(budget, clock, model, 0.05, 1.0, 2_000)
    assert decided == [1_000]


def test_a_slower_stretch_is_cut_at_the_deadline():
    clock, model, decided = FakeClock(), FakeModel(), []
    budget = TimeBudget(1, max_steps=100_000, on_decided=lambda end, rate: decided.append((end, rate)),
                        measure_seconds=5.0, clock=clock)
    budget.set_model(model)
    budget.on_train_begin()
    step_seconds = [10.0] + [0.125] * 40  # compile, then 8 steps/s while measuring (5 s)
    step_seconds += [1.0] * 1000  # then eight times slower (an evaluation, a shared GPU)
    for i, seconds in enumerate(step_seconds):
        clock.now += seconds
        model.optimizer.iterations.assign_add(1)
        budget.on_train_batch_end(i)
        if budget.end_step is not None and int(model.optimizer.iterations.numpy()) >= budget.end_step:
            break
    first, second = decided
    assert first == (41 + 360, pytest.approx(8.0))  # 15 s used: 45 s left at 8 steps/s
    assert second == (41 + 45, None)  # the minute is up 45 slow steps later
    assert budget.cut_short
    assert clock.now - 1000.0 == pytest.approx(60.0)


def test_a_budget_spent_by_the_compile_ends_at_the_next_step():
    clock, model, decided = FakeClock(), FakeModel(), []
    budget = TimeBudget(1, max_steps=100, on_decided=lambda end, rate: decided.append(end), clock=clock)
    drive(budget, clock, model, 0.5, 90.0, 10)
    assert decided == [2]


def test_adjustable_schedule_matches_a_fixed_one_of_the_new_length():
    moved = WarmupPolynomialDecay(1e-3, 100_000, 100, adjustable=True)
    fixed = WarmupPolynomialDecay(1e-3, 2_000, 100)
    assert float(moved(50)) == pytest.approx(1e-3 * (1 - 50 / 100_000) * 0.5)
    moved.set_train_steps(2_000)
    steps = np.array([0, 50, 100, 1_000, 1_999, 2_000, 2_500])
    np.testing.assert_allclose([float(moved(s)) for s in steps], [float(fixed(s)) for s in steps], rtol=1e-6)
    assert float(moved(2_000)) == 0.0
    assert moved.get_config()["train_steps"] == 2_000


def test_adjustable_schedule_is_read_inside_a_compiled_function():
    schedule = WarmupPolynomialDecay(1.0, 1_000, 0, adjustable=True)
    rate = tf.function(lambda step: schedule(step), jit_compile=True)
    assert float(rate(tf.constant(500))) == pytest.approx(0.5)
    schedule.set_train_steps(750)  # no retrace: the horizon is a variable
    assert float(rate(tf.constant(500))) == pytest.approx(1 / 3, rel=1e-6)


def test_a_fixed_schedule_refuses_to_move():
    with pytest.raises(ValueError, match="adjustable=True"):
        WarmupPolynomialDecay(1e-3, 100, 10).set_train_steps(50)
