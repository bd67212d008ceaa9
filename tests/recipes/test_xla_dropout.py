"""`recipes.xla_dropout`: ThreeFry dropout masks under XLA on TensorFlow, no change elsewhere."""

import doctest

import keras
import numpy as np
import pytest

import recipes.xla_dropout
from recipes.xla_dropout import use_threefry_dropout

ON_TF = keras.backend.backend() == "tensorflow"
tf_only = pytest.mark.skipif(not ON_TF, reason="the ThreeFry dropout applies to TensorFlow only")

RATE = 0.1
SHAPE = (64, 32, 48)  # 98,304 units


def inputs():
    return np.random.default_rng(0).uniform(1.0, 2.0, size=SHAPE).astype("float32")


@pytest.fixture
def original_dropout():
    """Keras' own TensorFlow dropout, whether or not an earlier test installed ours."""
    from keras.src.backend.tensorflow import random as tf_random

    return recipes.xla_dropout._ORIGINAL_DROPOUT or tf_random.dropout


def keras_dropout(x, seed):
    return keras.random.dropout(x, RATE, seed=seed)


@tf_only
def test_under_xla_the_mask_comes_from_threefry(original_dropout):
    import tensorflow as tf
    from keras.src.backend.tensorflow import random as tf_random

    x = inputs()

    def philox(x, seed):
        return original_dropout(x, RATE, seed=seed)

    def threefry_reference(x, seed):
        seed = tf_random._cast_seed(tf_random.draw_seed(seed))
        return tf.nn.experimental.stateless_dropout(x, rate=RATE, seed=seed, rng_alg="threefry")

    assert use_threefry_dropout() is True
    xla = {f.__name__: tf.function(f, jit_compile=True)
           for f in (keras_dropout, philox, threefry_reference)}
    ours = xla["keras_dropout"](x, 7).numpy()
    np.testing.assert_array_equal(ours, xla["threefry_reference"](x, 7).numpy())
    assert not np.array_equal(ours != 0, xla["philox"](x, 7).numpy() != 0)

    # Dropout's contract, checked directly: kept units scaled by 1 / (1 - rate),
    # each unit dropped with probability `rate` (5 binomial standard deviations).
    kept = ours != 0
    np.testing.assert_allclose(ours[kept], x[kept] / (1 - RATE), rtol=1e-6)
    n = x.size
    assert abs((n - kept.sum()) - RATE * n) < 5 * np.sqrt(n * RATE * (1 - RATE))
    # Another seed, another mask; the same seed, the same mask.
    other = xla["keras_dropout"](x, 8).numpy() != 0
    assert 0.7 < np.mean(kept == other) < 0.9  # about (1-r)^2 + r^2 = 0.82 for independent masks
    np.testing.assert_array_equal(xla["keras_dropout"](x, 7).numpy(), ours)


@tf_only
def test_outside_xla_keras_dropout_is_unchanged(original_dropout):
    import tensorflow as tf

    x = inputs()
    use_threefry_dropout()
    expected = original_dropout(x, RATE, seed=3).numpy()
    np.testing.assert_array_equal(keras_dropout(x, 3).numpy(), expected)
    graph = tf.function(keras_dropout, jit_compile=False)
    np.testing.assert_array_equal(graph(x, 3).numpy(), expected)
    # Rates 0 and 1 keep Keras' shortcuts.
    np.testing.assert_array_equal(np.asarray(keras.random.dropout(x, 0.0, seed=3)), x)


@tf_only
def test_installing_twice_keeps_one_layer():
    from keras.src.backend.tensorflow import random as tf_random

    use_threefry_dropout()
    use_threefry_dropout()
    assert tf_random.dropout is recipes.xla_dropout._dropout
    assert recipes.xla_dropout._ORIGINAL_DROPOUT is not recipes.xla_dropout._dropout


@tf_only
def test_a_keras_dropout_layer_trains_under_xla():
    """A fit with XLA through Keras' `Dropout` layer: the patched path in a real train step."""
    use_threefry_dropout()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((48,)), keras.layers.Dropout(0.5), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    x = np.random.default_rng(1).normal(size=(256, 48)).astype("float32")
    y = x[:, :1] * 0.5
    history = model.fit(x, y, epochs=3, batch_size=64, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.skipif(ON_TF, reason="checks the other backends")
def test_other_backends_are_left_alone():
    x = keras.ops.convert_to_tensor(inputs())
    before = keras.ops.convert_to_numpy(keras.random.dropout(x, RATE, seed=5))
    assert use_threefry_dropout() is False
    assert recipes.xla_dropout._ORIGINAL_DROPOUT is None
    after = keras.ops.convert_to_numpy(keras.random.dropout(x, RATE, seed=5))
    np.testing.assert_array_equal(after, before)


def test_docstring_examples_run():
    failures, tried = doctest.testmod(recipes.xla_dropout, verbose=False)
    assert tried > 0 and failures == 0
