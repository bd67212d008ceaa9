"""CollapseGuard: fires on scripted score drops, restores the best weights, and lowers the
learning rate that the compiled training step actually uses, on every backend."""

import doctest
import warnings

import keras
import numpy as np
import pytest

from keras_cosent.callbacks import CollapseGuard
from keras_cosent.callbacks import collapse_guard
from keras_cosent.optimizers import WarmupLinearDecay
from keras_cosent.optimizers import adamw
from tests.callbacks.test_resumable_training import Interrupt
from tests.callbacks.test_resumable_training import InterruptAfter

PEAK = 0.1
EPOCHS = 6


class ScriptedScores(keras.callbacks.Callback):
    """Writes a scripted dev score into the logs, as an evaluator would."""

    def __init__(self, scores, key="sts_dev_spearman"):
        super().__init__()
        self.scores, self.key = scores, key

    def on_epoch_end(self, epoch, logs=None):
        logs[self.key] = self.scores[epoch]


class WeightLog(keras.callbacks.Callback):
    """The model's single weight at the end of every epoch, after the callbacks before it."""

    def __init__(self):
        super().__init__()
        self.values = []

    def on_epoch_end(self, epoch, logs=None):
        self.values.append(float(self.model.get_weights()[0].reshape(())))


def _model(schedule=None):
    # y = w * x with x = 1 and loss = mean(y): the gradient is always 1. With
    # beta_1 = beta_2 = 0 Adam's step is lr * g / (|g| + eps), so each step
    # lowers w by exactly the learning rate the compiled step used.
    model = keras.Sequential([
        keras.Input((1,)),
        keras.layers.Dense(1, use_bias=False, kernel_initializer="ones"),
    ])
    schedule = schedule or WarmupLinearDecay(PEAK, total_steps=EPOCHS)
    optimizer = adamw(schedule, weight_decay=0.0)
    optimizer.beta_1, optimizer.beta_2 = 0.0, 0.0
    model.compile(optimizer, loss=lambda y_true, y_pred: keras.ops.mean(y_pred))
    return model, schedule


def _fit(model, scores, guard, epochs=EPOCHS):
    weights = WeightLog()
    history = model.fit(
        np.ones((1, 1), "float32"), np.zeros((1, 1), "float32"), batch_size=1,
        epochs=epochs, callbacks=[ScriptedScores(scores), guard, weights], verbose=0,
    )
    return history, weights.values


def _rate(step, multiplier=1.0):
    return PEAK * (EPOCHS - step) / EPOCHS * multiplier


def test_fires_restores_the_best_weights_and_lowers_the_rate_of_the_next_step():
    model, schedule = _model()
    guard = CollapseGuard(min_delta=0.05, factor=0.5, patience=2, verbose=0)
    #          epoch:  0    1    2     3    4     5
    scores = [0.5, 0.8, 0.77, 0.6, 0.9, 0.5]
    history, w = _fit(model, scores, guard)

    # 0.77 is within min_delta of 0.8; 0.6 and 0.5 are collapses.
    assert guard.fired_epochs == [3, 5]
    assert history.history["collapse_guard"] == [0.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    # After each firing the weights are the best epoch's, exactly.
    assert w[3] == w[1]
    assert w[5] == w[4]
    # One step per epoch: each epoch moves w by the rate its step used.
    np.testing.assert_allclose(w[0], 1.0 - _rate(0), rtol=1e-5)
    np.testing.assert_allclose(w[1] - w[0], -_rate(1), rtol=1e-5)
    # Epoch 4's step (step 4) runs after the first firing: half the schedule's rate,
    # starting from the restored epoch-1 weights.
    np.testing.assert_allclose(w[4] - w[3], -_rate(4, 0.5), rtol=1e-5)
    assert float(keras.ops.convert_to_numpy(schedule.multiplier)) == 0.25
    np.testing.assert_allclose(
        float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)), _rate(6, 0.25),
        atol=1e-7,
    )


def test_stops_intervening_after_patience(capsys):
    model, schedule = _model()
    guard = CollapseGuard(min_delta=0.0, factor=0.5, patience=1, verbose=1)
    scores = [0.8, 0.5, 0.4, 0.3, 0.2, 0.1]
    history, w = _fit(model, scores, guard)
    assert guard.fired_epochs == [1]
    assert history.history["collapse_guard"] == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert w[1] == w[0]
    # Later drops are not undone: every later epoch moves on from the last.
    assert all(b < a for a, b in zip(w[1:], w[2:]))
    assert float(keras.ops.convert_to_numpy(schedule.multiplier)) == 0.5
    out = capsys.readouterr().out
    assert "Epoch 2: collapse guard fired: sts_dev_spearman=0.5000" in out
    assert "no longer intervenes" in out


class OneBatch(keras.utils.PyDataset):
    """The single (x, y) batch of `_fit`, with the `set_epoch` ResumableTraining calls."""

    def __len__(self):
        return 1

    def __getitem__(self, index):
        return np.ones((1, 1), "float32"), np.zeros((1, 1), "float32")

    def set_epoch(self, epoch):
        pass


def test_a_resumed_run_guards_as_the_uninterrupted_one(tmp_path):
    # Fired once at epoch 1, patience 1: later drops are only reported. A resumed
    # run's guard started again without its memory: it took epoch 3's 0.3 as its
    # best and fired at epoch 4, past its patience, and ended elsewhere.
    from keras_cosent.callbacks import ResumableTraining

    scores = [0.8, 0.5, 0.4, 0.3, 0.2, 0.1]

    def run(backup, stop=None):
        model, schedule = _model()
        guard = CollapseGuard(min_delta=0.0, factor=0.5, patience=1, verbose=0)
        weights = WeightLog()
        callbacks = [ScriptedScores(scores), guard,
                     ResumableTraining(backup, OneBatch(), stateful=[guard]), weights]
        if stop is not None:
            callbacks.append(InterruptAfter(stop))
        history = model.fit(OneBatch(), epochs=EPOCHS, callbacks=callbacks, verbose=0,
                            shuffle=False)
        return guard, history.history, weights.values, schedule

    guard, history, w, schedule = run(tmp_path / "whole")
    assert guard.fired_epochs == [1]
    with pytest.raises(Interrupt):
        run(tmp_path / "cut", stop=2)
    resumed, resumed_history, resumed_w, resumed_schedule = run(tmp_path / "cut")
    assert resumed.fired_epochs == [1]
    assert resumed_history["collapse_guard"] == history["collapse_guard"][3:]
    np.testing.assert_allclose(resumed_w, w[3:], rtol=1e-6)
    assert resumed.best_score == guard.best_score and resumed.best_epoch == guard.best_epoch
    assert (float(keras.ops.convert_to_numpy(resumed_schedule.multiplier))
            == float(keras.ops.convert_to_numpy(schedule.multiplier)) == 0.5)


def test_the_backup_takes_only_callbacks_with_a_state():
    from keras_cosent.callbacks import ResumableTraining

    with pytest.raises(TypeError, match="`stateful` should hold callbacks with `get_state"):
        ResumableTraining("unused", OneBatch(), stateful=[WeightLog()])


def test_baseline_undoes_a_collapse_in_the_first_epoch():
    model, _ = _model()
    guard = CollapseGuard(min_delta=0.01, patience=1, baseline=0.6, verbose=0)
    history, w = _fit(model, [0.3, 0.7, 0.7, 0.7, 0.7, 0.7], guard)
    assert guard.fired_epochs == [0]
    assert w[0] == 1.0  # the weights fit started with
    np.testing.assert_allclose(w[1] - w[0], -_rate(1, 0.5), rtol=1e-5)


def test_a_nan_score_is_a_collapse():
    # NaN compares false with the best score, so a diverged model went unguarded.
    model, _ = _model()
    guard = CollapseGuard(min_delta=0.01, patience=2, baseline=0.5, verbose=0)
    history, w = _fit(model, [0.8, float("nan"), float("nan"), 0.8, 0.8, 0.8], guard)
    assert guard.fired_epochs == [1, 2]
    assert history.history["collapse_guard"] == [0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert w[1] == w[0] and w[2] == w[0]  # epoch 1's weights put back both times
    # Without a best to go back to (no baseline, NaN first), there is nothing to undo.
    model, _ = _model()
    guard = CollapseGuard(verbose=0)
    _fit(model, [float("nan"), 0.8], guard, epochs=2)
    assert guard.fired_epochs == [] and guard.best_epoch == 1


def test_a_constant_learning_rate_is_multiplied_too():
    model = keras.Sequential([
        keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
    ])
    optimizer = adamw(0.1, weight_decay=0.0)
    optimizer.beta_1, optimizer.beta_2 = 0.0, 0.0
    model.compile(optimizer, loss=lambda y_true, y_pred: keras.ops.mean(y_pred))
    guard = CollapseGuard(factor=0.25, patience=1, verbose=0)
    _, w = _fit(model, [0.8, 0.1, 0.9], guard, epochs=3)
    assert w[1] == w[0]
    np.testing.assert_allclose(w[2] - w[1], -0.025, rtol=1e-5)


def test_under_float16_loss_scaling_the_rate_the_update_uses_is_lowered():
    # Keras wraps the optimizer in a LossScaleOptimizer, whose own `learning_rate`
    # variable is unused: the guard must lower the inner optimizer's schedule.
    policy = keras.config.dtype_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model, schedule = _model()
        guard = CollapseGuard(factor=0.5, patience=1, verbose=0)
        _, w = _fit(model, [0.5, 0.8, 0.3, 0.9], guard, epochs=4)
    finally:
        keras.mixed_precision.set_global_policy(policy)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert guard.fired_epochs == [2] and w[2] == w[1]
    assert float(keras.ops.convert_to_numpy(schedule.multiplier)) == 0.5
    # Epoch 3's step, after the firing, moves w by half the schedule's rate.
    np.testing.assert_allclose(w[3] - w[2], -_rate(3, 0.5), rtol=1e-5)


def test_missing_monitor_is_named():
    model, _ = _model()
    guard = CollapseGuard(monitor="dev_spearman", verbose=0)
    with pytest.raises(ValueError, match="'dev_spearman', which is not in the epoch logs"):
        _fit(model, [0.5] * EPOCHS, guard, epochs=1)


def test_a_schedule_without_a_multiplier_is_refused():
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9)),
                  loss="mse")
    with pytest.raises(ValueError, match="Received: learning rate of type ExponentialDecay"):
        _fit(model, [0.5], CollapseGuard(verbose=0), epochs=1)


def test_an_untracked_multiplier_is_refused():
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(WarmupLinearDecay(0.1, 10)), loss="mse")
    with pytest.raises(ValueError, match="not one of the optimizer's variables"):
        _fit(model, [0.5], CollapseGuard(verbose=0), epochs=1)


@pytest.mark.parametrize("kwargs, message", [
    ({"monitor": ""}, "`monitor`=''"),
    # Read as higher-is-better, a falling loss was a collapse every epoch.
    ({"monitor": "loss"}, "higher is better.*not a loss.*`monitor`='loss'"),
    ({"monitor": "val_loss_cosent"}, "not a loss"),
    ({"min_delta": -0.1}, "`min_delta`=-0.1"),
    ({"factor": 1.0}, "`factor`=1.0"),
    ({"factor": 0}, "`factor`=0"),
    ({"patience": 0}, "`patience`=0"),
    ({"patience": 1.5}, "`patience`=1.5"),
    ({"baseline": float("nan")}, "`baseline`=nan"),
    ({"verbose": 2}, "`verbose`=2"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CollapseGuard(**kwargs)


def test_the_multiplier_is_saved_with_the_optimizer_state(tmp_path):
    model, schedule = _model()
    model.optimizer.build(model.trainable_variables)
    schedule.multiplier.assign(0.25)
    model.save_weights(tmp_path / "state.weights.h5")
    restored, restored_schedule = _model()
    restored.optimizer.build(restored.trainable_variables)
    restored.load_weights(tmp_path / "state.weights.h5")
    assert float(keras.ops.convert_to_numpy(restored_schedule.multiplier)) == 0.25


def test_schedule_config_round_trips_the_multiplier():
    schedule = WarmupLinearDecay(1.0, total_steps=10)
    schedule.multiplier.assign(0.5)
    with warnings.catch_warnings():
        # Every save of a model reads the multiplier: through np.array of a Keras
        # variable, NumPy 2 warned each time.
        warnings.filterwarnings("error", message=".*__array__ implementation",
                                category=DeprecationWarning)
        config = schedule.get_config()
    clone = WarmupLinearDecay.from_config(config)
    assert float(keras.ops.convert_to_numpy(clone(5))) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="`multiplier`=0"):
        WarmupLinearDecay(1.0, total_steps=10, multiplier=0)


def test_docstring_example_runs():
    result = doctest.testmod(collapse_guard, verbose=False)
    assert result.attempted > 0 and result.failed == 0
