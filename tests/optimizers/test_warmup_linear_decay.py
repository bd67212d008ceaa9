"""WarmupLinearDecay against the formula written out in NumPy."""

import keras
import numpy as np
import pytest

from keras_cosent.optimizers import WarmupLinearDecay


def reference(step, peak, total, warmup):
    if step < warmup:
        return peak * step / warmup
    if step >= total:
        return 0.0
    return peak * (total - step) / (total - warmup)


@pytest.mark.parametrize("total, warmup", [(10, 2), (7, 0), (5, 5), (100, 10)])
def test_matches_the_reference(total, warmup):
    schedule = WarmupLinearDecay(3e-5, total, warmup)
    steps = list(range(total + 3))
    got = [float(keras.ops.convert_to_numpy(schedule(s))) for s in steps]
    want = [reference(s, 3e-5, total, warmup) for s in steps]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)


def test_serialization_round_trip():
    schedule = WarmupLinearDecay(2e-5, 40, 4)
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule)
    )
    assert isinstance(restored, WarmupLinearDecay)
    assert restored.get_config() == schedule.get_config()


def test_drives_an_optimizer():
    variable = keras.Variable(np.ones(3, dtype="float32"))
    optimizer = keras.optimizers.AdamW(learning_rate=WarmupLinearDecay(0.1, 4, 2))
    optimizer.apply_gradients([(keras.ops.ones((3,)), variable)])
    assert float(keras.ops.convert_to_numpy(optimizer.learning_rate)) == pytest.approx(0.05)


@pytest.mark.parametrize("kwargs, message", [
    ({"peak_learning_rate": 0, "total_steps": 5}, "peak_learning_rate"),
    ({"peak_learning_rate": 1e-3, "total_steps": 0}, "total_steps"),
    ({"peak_learning_rate": 1e-3, "total_steps": 5, "warmup_steps": 6}, "warmup_steps"),
    # A fraction, as build's `warmup` takes it, used to mean int(0.1) = no warm-up.
    ({"peak_learning_rate": 1e-3, "total_steps": 10, "warmup_steps": 0.1},
     r"a step count, not a fraction\). Received: `warmup_steps`=0.1"),
    ({"peak_learning_rate": 1e-3, "total_steps": 2.5}, r"`total_steps`=2.5"),
    ({"peak_learning_rate": float("inf"), "total_steps": 5}, r"`peak_learning_rate`=inf"),
    ({"peak_learning_rate": float("nan"), "total_steps": 5}, r"`peak_learning_rate`=nan"),
    ({"peak_learning_rate": "1e-3", "total_steps": 5}, r"`peak_learning_rate`='1e-3'"),
    ({"peak_learning_rate": 1e-3, "total_steps": 5, "multiplier": float("inf")},
     r"`multiplier`=inf"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WarmupLinearDecay(**kwargs)
