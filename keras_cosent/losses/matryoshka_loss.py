"""Matryoshka representation learning: one loss at several truncations.

`matryoshka_loss` holds the maths; `MatryoshkaLoss` wraps it.
"""

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import WeightsPassingLoss
from keras_cosent.losses._validation import as_sequence
from keras_cosent.losses._validation import check_non_negative_float
from keras_cosent.losses._validation import labels_read_by
from keras_cosent.utils.truncation import check_matryoshka_dims
from keras_cosent.utils.truncation import truncate_embeddings


def _check_dims_and_weights(dims, weights):
    """The checked `(dims, weights)` as tuples, for the class and the function.

    The loss is a sum over `dims`, so their order does not matter; a repeated
    dim would count its truncation twice, and is refused as
    `keras_cosent.training.build(matryoshka_dims=...)` refuses it.
    """
    checked = check_matryoshka_dims(dims)
    if weights is None:
        return checked, (1.0,) * len(checked)
    weight_tuple = as_sequence(weights)
    if weight_tuple is None or len(weight_tuple) != len(checked):
        raise ValueError(
            f"`weights` should have one entry per dim ({len(checked)}). "
            f"Received: `weights`={weights!r}"
        )
    weight_tuple = tuple(check_non_negative_float("weights", w) for w in weight_tuple)
    if not any(weight_tuple):
        # A loss of 0 whatever the embeddings, as `JointLoss` refuses too.
        raise ValueError(
            "`weights` should give at least one dim a positive weight. "
            f"Received: `weights`={weights!r}"
        )
    return checked, weight_tuple


def matryoshka_loss(y_true, y_pred, loss, dims, weights=None, sample_weight=None):
    """Weighted sum of `loss` on each truncation of `y_pred`, a scalar.

    See `keras_cosent.losses.MatryoshkaLoss` for the arguments, checked as the
    class checks them, except that `loss` may be any callable
    `loss(y_true, y_pred)` here (`loss(y_true, y_pred, sample_weight=...)`
    when `sample_weight` is given).
    """
    if not callable(loss):
        raise ValueError(
            f"`loss` should be callable as `loss(y_true, y_pred)`. Received: `loss`={loss!r}"
        )
    dims, weights = _check_dims_and_weights(dims, weights)
    if isinstance(y_pred, dict):
        # InfoNCE's momentum-queue form: the queue would need truncating too.
        raise ValueError(
            "`MatryoshkaLoss` takes `y_pred` as an array of embeddings; a dict (InfoNCE's "
            f"momentum-queue form, keys {sorted(y_pred)}) is not supported."
        )
    # Sliced and re-normalised in float32: a half-precision slice would carry
    # its rounding into every score, where the other losses score in float32.
    y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    if len(y_pred.shape) < 2:
        # One value per row (cosines): its last axis is the batch, which the
        # dims would have cut and re-normalised without a word.
        raise ValueError(
            "`MatryoshkaLoss` truncates embeddings: `y_pred` should have shape "
            "(batch, dim) or (batch, columns, dim), not one value per row (cosines). "
            f"Received shape {tuple(y_pred.shape)}."
        )
    full = y_pred.shape[-1]
    total = 0.0
    for dim, weight in zip(dims, weights):
        if full is not None and dim > full:
            raise ValueError(
                f"`MatryoshkaLoss` dims entry {dim} is larger than the embedding "
                f"dimension {full} of `y_pred` (shape {tuple(y_pred.shape)})."
            )
        truncated = truncate_embeddings(y_pred, dim)
        try:
            if sample_weight is None:
                value = loss(y_true, truncated)
            else:
                value = loss(y_true, truncated, sample_weight=sample_weight)
        except ValueError as error:
            # The inner loss names the shape it was given, the truncated one.
            raise ValueError(
                f"{error} (`MatryoshkaLoss` gave it `y_pred` of shape "
                f"{tuple(y_pred.shape)} cut to its first {dim} coordinates)"
            ) from error
        total = total + weight * value
    return total


@keras_cosent_export
class MatryoshkaLoss(WeightsPassingLoss):
    """Applies an embedding loss to several leading slices of the embeddings.

    For each `d` in `dims`, the inner `loss` is computed on the first `d`
    coordinates of every embedding, re-normalised, and the results are
    summed with `weights` (`None`: 1 for each, as in sentence-transformers).
    A `sample_weight` goes to the inner loss on every slice, which weighs its
    rows as it does alone (`InfoNCELoss` each anchor, say).

    Args:
        loss: a `keras.losses.Loss` instance taking embeddings as `y_pred`
            (e.g. `keras_cosent.losses.InfoNCELoss()`).
        dims: distinct positive ints, each <= the embedding dimension at call
            time, in any order.
        weights: `None` or one finite float >= 0 per entry of `dims`.
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
        self.loss = loss
        self.dims, self.weights = _check_dims_and_weights(dims, weights)

    def labels_read(self):
        return labels_read_by(self.loss)

    def call(self, y_true, y_pred, sample_weight=None):
        return matryoshka_loss(y_true, y_pred, self.loss, self.dims, self.weights,
                               sample_weight=sample_weight)

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
