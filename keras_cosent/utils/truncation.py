"""Matryoshka truncation: keep the first `dim` coordinates, re-normalised."""

from keras import ops

from keras_cosent.utils.similarity import l2_normalize


def truncate_embeddings(x, dim):
    """Returns the first `dim` coordinates of `x` (last axis), L2-normalised.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> x = np.array([[3.0, 4.0, 12.0]], dtype="float32")
    >>> np.round(np.asarray(keras_cosent.utils.truncate_embeddings(x, 2)), 3)
    array([[0.6, 0.8]], dtype=float32)
    """
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
        raise ValueError(f"`dim` should be a positive int. Received: `dim`={dim!r}")
    x = ops.convert_to_tensor(x)
    full = x.shape[-1]
    if full is not None and dim > full:
        raise ValueError(
            f"`dim`={dim} is larger than the embedding dimension {full}."
        )
    return l2_normalize(x[..., :dim])
