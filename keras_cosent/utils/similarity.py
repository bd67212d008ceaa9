"""Cosine similarity of the two sides of each pair, the quantity every loss ranks.

Losses and metrics accept `y_pred` either as one cosine per pair, shape
`(batch,)`, or as the two embeddings of each pair, shape `(batch, 2, dim)` (what
`keras_cosent.models.SiameseEncoder` outputs). `pair_cosine` maps both to
`(batch,)` float32 so that the maths downstream sees one form only.
"""

from keras import ops


def l2_normalize(x, axis=-1, epsilon=1e-12):
    """Scales `x` to unit L2 norm along `axis`, with finite gradients everywhere.

    `keras.ops.normalize` clips the inverse norm after taking it, so an all-zero
    vector yields `inf * 0`: NaN gradients on JAX and PyTorch. Clipping the
    squared norm before `rsqrt` keeps value and gradient finite (a zero vector
    stays zero).

    Example:

    >>> import numpy as np
    >>> from keras_cosent.utils import l2_normalize
    >>> np.asarray(l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))).round(2).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    x = ops.convert_to_tensor(x)
    squared = ops.sum(ops.square(x), axis=axis, keepdims=True)
    return x * ops.rsqrt(ops.maximum(squared, ops.cast(epsilon, x.dtype)))


def pair_cosine(y_pred):
    """Returns the cosine of each pair as a float32 tensor of shape `(batch,)`.

    Args:
        y_pred: either cosines of shape `(batch,)` (or `(batch, 1)`), or pair
            embeddings of shape `(batch, 2, dim)`; embeddings need not be
            normalised. Any further columns (hard negatives) are ignored.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.utils import pair_cosine
    >>> emb = np.array([[[1.0, 0.0], [1.0, 1.0]]], dtype="float32")
    >>> round(float(pair_cosine(emb)[0]), 4)
    0.7071
    """
    y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    rank = len(y_pred.shape)
    if rank == 1:
        return y_pred
    if rank == 2 and y_pred.shape[-1] == 1:
        return ops.squeeze(y_pred, axis=-1)
    if rank == 3:
        if y_pred.shape[1] is not None and y_pred.shape[1] < 2:
            raise ValueError(
                "Pair embeddings need at least 2 columns (anchor, other); "
                f"received `y_pred` of shape {tuple(y_pred.shape)}."
            )
        a = l2_normalize(y_pred[:, 0, :])
        b = l2_normalize(y_pred[:, 1, :])
        return ops.sum(a * b, axis=-1)
    raise ValueError(
        "Expected `y_pred` of shape (batch,) with one cosine per pair, or "
        f"(batch, 2, dim) with the pair's embeddings. Received shape {tuple(y_pred.shape)}."
    )
