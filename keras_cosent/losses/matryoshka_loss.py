"""Matryoshka representation learning: one loss at several truncations.

`matryoshka_loss` holds the maths; `MatryoshkaLoss` wraps it.
"""

import keras

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.utils.truncation import truncate_embeddings


def matryoshka_loss(y_true, y_pred, loss, dims, weights):
    """Weighted sum of `loss` on each truncation of `y_pred`, a scalar."""
    full = y_pred.shape[-1]
    total = 0.0
    for dim, weight in zip(dims, weights):
        if full is not None and dim > full:
            raise ValueError(
                f"`MatryoshkaLoss` dims entry {dim} is larger than the embedding "
                f"dimension {full} of `y_pred` (shape {tuple(y_pred.shape)})."
            )
        total = total + weight * loss(y_true, truncate_embeddings(y_pred, dim))
    return total


@keras_cosent_export
class MatryoshkaLoss(keras.losses.Loss):
    """Applies an embedding loss to several leading slices of the embeddings.

    For each `d` in `dims`, the inner `loss` is computed on the first `d`
    coordinates of every embedding, re-normalised, and the results are
    summed with `weights` (`None`: 1 for each, as in sentence-transformers).

    Args:
        loss: a `keras.losses.Loss` instance taking embeddings as `y_pred`
            (e.g. `keras_cosent.losses.InfoNCELoss()`).
        dims: positive ints, each <= the embedding dimension at call time.
        weights: `None` or one finite float per entry of `dims`.
        name: name of the loss instance.
        reduction: Keras reduction (on the scalar sum).

    Inputs:
        y_true, y_pred: what the inner loss takes.

    Returns:
        A float32 scalar.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> loss = keras_cosent.losses.MatryoshkaLoss(
    ...     keras_cosent.losses.SupConLoss(), dims=(4, 2))
    >>> float(loss(np.arange(3), np.eye(3, 4, dtype="float32")))
    0.0

    Reference:
        Kusupati et al., "Matryoshka Representation Learning" (2022),
        https://arxiv.org/abs/2205.13147
    """

    def __init__(
        self,
        loss,
        dims=(384, 256, 128, 64),
        weights=None,
        name="matryoshka_loss",
        reduction="sum_over_batch_size",
    ):
        super().__init__(name=name, reduction=reduction)
        if isinstance(loss, dict):
            loss = keras.losses.deserialize(loss)
        if not isinstance(loss, keras.losses.Loss):
            raise ValueError(
                f"`loss` should be a keras.losses.Loss instance. Received: `loss`={loss!r}"
            )
        dims = tuple(dims)
        if not dims or any(
            isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in dims
        ):
            raise ValueError(
                f"`dims` should be a non-empty sequence of positive ints. "
                f"Received: `dims`={dims!r}"
            )
        if weights is None:
            weights = (1.0,) * len(dims)
        weights = tuple(weights)
        if len(weights) != len(dims):
            raise ValueError(
                f"`weights` should have one entry per dim ({len(dims)}). "
                f"Received: `weights`={weights!r}"
            )
        self.loss = loss
        self.dims = dims
        self.weights = tuple(float(w) for w in weights)

    def call(self, y_true, y_pred):
        return matryoshka_loss(y_true, y_pred, self.loss, self.dims, self.weights)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "loss": keras.losses.serialize(self.loss),
                "dims": list(self.dims),
                "weights": list(self.weights),
            }
        )
        return config
