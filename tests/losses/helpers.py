"""Backend-neutral helpers for the loss tests: gradients, tiny models, round trips."""

import keras
import numpy as np

from tests.kit import MIXED_ATOL
from tests.kit import MIXED_RTOL
from tests.kit import check_serialization  # noqa: F401 (the loss tests call it from here)


def value_and_grad(fn, y_pred):
    """Value of the scalar `fn(y_pred)` and its gradient, as NumPy arrays."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        value, grad = jax.value_and_grad(fn)(jax.numpy.asarray(y_pred))
    elif backend == "tensorflow":
        import tensorflow as tf

        x = tf.convert_to_tensor(y_pred)
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = fn(x)
        grad = tape.gradient(value, x)
    elif backend == "torch":
        import torch

        # On Keras' device (a GPU's, where a layer's weights live there).
        x = keras.ops.convert_to_tensor(y_pred).detach().clone().requires_grad_(True)
        value = fn(x)
        value.backward()
        value, grad = value.detach(), x.grad
    else:
        raise NotImplementedError(backend)
    to_np = keras.ops.convert_to_numpy
    return np.asarray(to_np(value), "float64"), np.asarray(to_np(grad), "float64")


def assert_finite_value_and_grad(fn, y_pred):
    value, grad = value_and_grad(fn, y_pred)
    assert np.all(np.isfinite(value)), value
    assert np.all(np.isfinite(grad)), grad
    return value, grad


def embedding_model(columns, dim, features=6, head=None):
    """Dense on random features reshaped to (batch, columns, dim), then `head`."""
    inputs = keras.Input((features,))
    x = keras.layers.Dense(columns * dim)(inputs)
    x = keras.layers.Reshape((columns, dim))(x)
    if head is not None:
        x = head(x)
    return keras.Model(inputs, x)


def fit_history(model, loss, x, y, epochs=6, learning_rate=0.05):
    """Full-batch fit; returns the per-epoch losses (each before its update)."""
    model.compile(keras.optimizers.Adam(learning_rate), loss=loss)
    history = model.fit(x, y, batch_size=len(x), epochs=epochs, shuffle=False, verbose=0)
    return history.history["loss"]


def check_fit_and_saved_model(tmp_path, loss, x, y, columns, dim, head=None):
    """A few fit steps lower `loss`; the compiled model survives a `.keras` round trip."""
    model = embedding_model(columns, dim, features=x.shape[1], head=head)
    losses = fit_history(model, loss, x, y)
    assert np.all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0], losses
    path = str(tmp_path / "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert type(reloaded.loss) is type(loss)
    assert reloaded.loss.get_config() == loss.get_config()
    expected = model.evaluate(x, y, batch_size=len(x), verbose=0)
    got = reloaded.evaluate(x, y, batch_size=len(x), verbose=0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def check_mixed_float16(loss, x, y, columns, dim, head=None, rtol=MIXED_RTOL, atol=MIXED_ATOL):
    """Under mixed_float16 the model emits float16, and the loss equals the float32 model's.

    The mixed-precision model gets the float32 model's weights; its float16
    activations move the loss by about 1e-3 relative (`tests.kit` states the
    tolerances). Two fit steps then stay finite.
    """
    reference = embedding_model(columns, dim, features=x.shape[1], head=head)
    reference.compile(loss=loss)
    expected = reference.evaluate(x, y, batch_size=len(x), verbose=0)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = embedding_model(columns, dim, features=x.shape[1], head=head)
        model.set_weights(reference.get_weights())
        assert keras.backend.standardize_dtype(model.output.dtype) == "float16"
        model.compile(loss=loss)
        got = model.evaluate(x, y, batch_size=len(x), verbose=0)
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
        losses = fit_history(model, loss, x, y, epochs=2)
        assert np.all(np.isfinite(losses)), losses
    finally:
        keras.mixed_precision.set_global_policy("float32")
