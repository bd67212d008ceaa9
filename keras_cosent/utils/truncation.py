"""Matryoshka truncation: keep the first `dim` coordinates, re-normalised.

`truncate_embeddings` is the one truncation: `MatryoshkaLoss` trains through it,
`SentenceEncoder.encode(truncate_dim=)` and the exported SavedModel
(`export_saved_model(truncate_dim=)`) serve through it; `check_truncate_dim`
is their shared check of a user's `truncate_dim`.
"""

import numpy as np
from keras import ops

from keras_cosent.utils.similarity import l2_normalize


def truncate_embeddings(x, dim):
    """Returns the first `dim` coordinates of `x` (last axis), L2-normalised.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> import keras_cosent
    >>> x = np.array([[3.0, 4.0, 12.0]], dtype="float32")
    >>> np.round(keras.ops.convert_to_numpy(keras_cosent.utils.truncate_embeddings(x, 2)), 3)
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


def check_truncate_dim(truncate_dim, embedding_dim):
    """`truncate_dim` as an int, checked to be in `[1, embedding_dim]`; `None` stays `None`.

    Example:

    >>> from keras_cosent.utils.truncation import check_truncate_dim
    >>> check_truncate_dim(64, 384)
    64
    """
    if truncate_dim is None:
        return None
    if (
        isinstance(truncate_dim, bool)
        or not isinstance(truncate_dim, (int, np.integer))
        or not 0 < truncate_dim <= embedding_dim
    ):
        raise ValueError(
            f"`truncate_dim` should be a positive int at most the embedding dimension "
            f"{embedding_dim}. Received: `truncate_dim`={truncate_dim!r}"
        )
    return int(truncate_dim)
