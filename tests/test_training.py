"""The training loop both tracks share: stopping rules, evaluation, keeping the best weights."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from attention_course.training import TrainConfig, run_training


class Fake:
    """A 'model' whose weights are a step counter, with scripted accuracies."""

    def __init__(self, accuracies, losses=None):
        self.weights = {"w": 0}
        self.accuracies = list(accuracies)
        self.losses = losses
        self.seen = []

    def step(self, indices):
        self.seen.append(np.asarray(indices))
        self.weights["w"] += 1
        loss = self.losses[self.weights["w"] - 1] if self.losses else 1.0 / self.weights["w"]
        return loss, 0.0

    def evaluate(self):
        return self.accuracies.pop(0)

    def snapshot(self):
        return dict(self.weights)

    def restore(self, state):
        self.weights.update(state)


def test_keeps_the_best_evaluation_when_training_gets_worse():
    fake = Fake([0.5, 0.9, 0.7])
    result = run_training(fake.step, 100, TrainConfig(batch_size=10, max_steps=30, eval_every=10), fake.evaluate,
                          progress=False, snapshot=fake.snapshot, restore=fake.restore)
    assert [step for step, _ in result.evaluations] == [10, 20, 30]
    assert result.restored_step == 20 and fake.weights["w"] == 20
    assert result.test_exact_match == 0.9
    assert result.steps == 30


def test_no_restore_when_the_end_is_the_best_or_when_disabled():
    fake = Fake([0.5, 0.9, 0.95])
    result = run_training(fake.step, 100, TrainConfig(batch_size=10, max_steps=30, eval_every=10), fake.evaluate,
                          progress=False, snapshot=fake.snapshot, restore=fake.restore)
    assert result.restored_step is None and fake.weights["w"] == 30 and result.test_exact_match == 0.95
    fake = Fake([0.5, 0.9, 0.7])
    result = run_training(fake.step, 100, TrainConfig(batch_size=10, max_steps=30, eval_every=10, restore_best=False),
                          fake.evaluate, progress=False, snapshot=fake.snapshot, restore=fake.restore)
    assert result.restored_step is None and fake.weights["w"] == 30 and result.test_exact_match == 0.7


def test_target_accuracy_stops_at_the_first_evaluation_that_reaches_it():
    fake = Fake([0.5, 0.99, 0.2])
    result = run_training(fake.step, 100, TrainConfig(batch_size=10, max_steps=100, eval_every=10,
                                                      target_accuracy=0.99), fake.evaluate, progress=False)
    assert result.steps == 20 and result.stopped_because == "target accuracy reached"
    assert result.test_exact_match == 0.99


def test_epochs_cover_every_example_once_per_epoch():
    fake = Fake([1.0] * 10)
    result = run_training(fake.step, 25, TrainConfig(batch_size=10, epochs=2, eval_every=100), None, progress=False)
    assert result.steps == 6 and result.stopped_because == "epochs done"
    first_epoch = np.sort(np.concatenate(fake.seen[:3]))
    np.testing.assert_array_equal(first_epoch, np.arange(25))


def test_a_loss_that_is_not_finite_stops_training_and_restores_the_best():
    fake = Fake([0.8, 0.1], losses=[1.0] * 19 + [math.nan] * 30)
    result = run_training(fake.step, 100, TrainConfig(batch_size=10, max_steps=40, eval_every=10), fake.evaluate,
                          progress=False, snapshot=fake.snapshot, restore=fake.restore)
    assert result.stopped_because == "loss is not finite"
    assert result.steps == 20
    assert result.restored_step == 10 and fake.weights["w"] == 10


def _busy(seconds):
    """Spend ``seconds`` of this process's CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_max_cpu_seconds_counts_the_processs_cpu_time_not_the_clock():
    def busy_step(indices):
        _busy(0.01)
        return 1.0, 0.0

    result = run_training(busy_step, 100, TrainConfig(batch_size=10, max_steps=10_000, max_cpu_seconds=0.1),
                          progress=False)
    assert result.stopped_because == "max_cpu_seconds reached"
    assert 0.1 <= result.cpu_seconds and result.steps < 100

    def idle_step(indices):  # wall-clock time that costs no CPU: not counted against the budget
        time.sleep(0.02)
        return 1.0, 0.0

    result = run_training(idle_step, 100, TrainConfig(batch_size=10, max_steps=10, max_cpu_seconds=0.15),
                          progress=False)
    assert result.stopped_because == "max_steps reached" and result.steps == 10
    assert result.cpu_seconds < 0.15 <= result.train_seconds


def test_config_needs_a_stopping_rule():
    with pytest.raises(ValueError, match="at least one of"):
        TrainConfig()


class Interrupted(Fake):
    """Raises ``error`` in the step numbered ``at`` (1-based), after the earlier steps ran."""

    def __init__(self, accuracies, error, at):
        super().__init__(accuracies)
        self.error, self.at = error, at
        self.evaluations = 0

    def step(self, indices):
        if self.weights["w"] + 1 == self.at:
            raise self.error
        return super().step(indices)

    def evaluate(self):
        self.evaluations += 1
        return super().evaluate()


@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("a crash in a step")],
                         ids=["ctrl_c", "crash"])
def test_an_interruption_re_raises_at_once_and_leaves_the_last_steps_weights(error):
    # Evaluations at steps 10 and 20 (0.9 then 0.1): a normal stop would put step 10's weights back.
    fake = Interrupted([0.9, 0.1, 0.5], error, at=25)
    with pytest.raises(type(error)) as raised:
        run_training(fake.step, 100, TrainConfig(batch_size=10, max_steps=40, eval_every=10), fake.evaluate,
                     progress=False, snapshot=fake.snapshot, restore=fake.restore)
    assert raised.value is error, "the original exception, not one from a final evaluation"
    assert fake.evaluations == 2, "no evaluation after the interruption"
    assert fake.weights["w"] == 24, "the weights of the last step, not the best evaluation's"


def test_an_error_in_an_evaluation_propagates_without_another_evaluation():
    calls = []

    def evaluate():
        calls.append(1)
        raise ValueError("evaluation broke")

    fake = Fake([])
    with pytest.raises(ValueError, match="evaluation broke"):
        run_training(fake.step, 100, TrainConfig(batch_size=10, max_steps=40, eval_every=10), evaluate,
                     progress=False, snapshot=fake.snapshot, restore=fake.restore)
    assert len(calls) == 1 and fake.weights["w"] == 10


def test_a_task_that_draws_its_own_batches_gets_none_and_has_no_epochs():
    fake = Fake([0.4, 0.6, 0.5])
    result = run_training(fake.step, None, TrainConfig(max_steps=25, eval_every=10), fake.evaluate, progress=False,
                          snapshot=fake.snapshot, restore=fake.restore)
    assert result.steps == 25 and all(seen.ndim == 0 and seen.item() is None for seen in fake.seen)
    assert [step for step, _ in result.evaluations] == [10, 20, 25] and result.restored_step == 20
    with pytest.raises(ValueError, match="no epochs"):
        run_training(fake.step, None, TrainConfig(epochs=1), progress=False)


def test_evaluations_are_timed_and_named_as_the_config_says():
    def busy_step(indices):
        _busy(0.01)
        return 1.0, 0.0

    lines = []
    accuracies = iter([0.5, 0.9, 0.7])
    result = run_training(busy_step, 100, TrainConfig(batch_size=10, max_steps=25, eval_every=10,
                                                      metric="test bit accuracy"),
                          lambda: (_busy(0.05), next(accuracies))[1], progress=False, log=lines.append,
                          snapshot=dict, restore=lambda weights: None)
    assert lines[0] == "step 10: loss 1.0000, test bit accuracy 0.5000"
    assert lines[-1] == "restored the weights of step 20 (test bit accuracy 0.9000, the best evaluation)"
    cpu = result.evaluation_cpu_seconds
    assert len(cpu) == len(result.evaluation_seconds) == 3 and cpu[0] < cpu[1] < cpu[2]
    assert cpu[1] - cpu[0] >= 0.1 + 0.05, "ten steps and an evaluation between them"
    # the final evaluation is stamped when the stopping rule fired, before it ran
    assert cpu[2] == result.stopped_cpu_seconds and result.evaluation_seconds[2] == result.stopped_seconds
    assert result.stopped_cpu_seconds + 0.05 <= result.cpu_seconds
