"""Independent NumPy references and a pass-through model for the metric tests."""

import keras
import numpy as np
from keras import ops

from keras_cosent.utils import pair_cosine


def noisy_pair_embeddings(scores, dim=8, seed=0):
    """(n, 2, dim) pair embeddings whose cosine follows `scores` up to noise."""
    rng = np.random.default_rng(seed)
    n = len(scores)
    a = rng.normal(size=(n, dim))
    noise = rng.normal(size=(n, dim))
    # The lower the score, the more the second side is pushed away from the first.
    scale = (5.0 - np.asarray(scores))[:, None] / 5.0 * 1.5 + 0.1
    b = a + scale * noise
    return np.stack([a, b], axis=1).astype("float32")


def numpy_pair_cosine(embeddings):
    x = np.asarray(embeddings, dtype="float64")
    a, b = x[:, 0], x[:, 1]
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


# XLA on TensorFlow and JAX (TensorFlow's "auto" would be a plain tf.function);
# torch.compile also works but costs seconds per test.
JIT_COMPILE = keras.backend.backend() != "torch"


def pass_through_model(input_shape, metrics=None, weighted_metrics=None):
    """A model whose predictions are its inputs, so the test controls y_pred exactly."""
    model = keras.Sequential([keras.Input(shape=input_shape), keras.layers.Identity()])
    # TensorFlow and torch trainers refuse to evaluate without a loss.
    model.compile(
        loss=_cosine_mse,
        metrics=metrics,
        weighted_metrics=weighted_metrics,
        jit_compile=JIT_COMPILE,
    )
    return model


def _cosine_mse(y_true, y_pred):
    return ops.mean(ops.square(pair_cosine(y_pred) - ops.reshape(y_true, (-1,))))
