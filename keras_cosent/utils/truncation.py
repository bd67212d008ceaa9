"""Matryoshka truncation: keep the first `dim` coordinates, re-normalised.

`truncate_embeddings` is the one truncation: `MatryoshkaLoss` trains through it,
`SentenceEncoder.encode(truncate_dim=)` and the exported SavedModel
(`export_saved_model(truncate_dim=)`) serve through it; `check_truncate_dim`
is their shared check of a user's `truncate_dim`, and `check_matryoshka_dims`
the check of the dims that `MatryoshkaLoss` and `build(matryoshka_dims=)` train.
"""

import numbers

import numpy as np
from keras import ops

from keras_cosent.utils.arguments import is_int
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
    if not is_int(dim) or dim <= 0:
        raise ValueError(f"`dim` should be a positive int. Received: `dim`={dim!r}")
    dim = int(dim)
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


def check_matryoshka_dims(dims, embedding_dim=None, argument="dims"):
    """`dims` as a tuple of ints, checked: distinct, positive, at most `embedding_dim`.

    Args:
        dims: a non-empty sequence of positive ints, in any order.
        embedding_dim: None, or the size no entry may exceed.
        argument: the argument's name in the errors.

    Example:

    >>> from keras_cosent.utils.truncation import check_matryoshka_dims
    >>> check_matryoshka_dims([384, 128, 64], 384)
    (384, 128, 64)
    """
    if isinstance(dims, (str, bytes, dict)) or not hasattr(dims, "__iter__"):
        raise ValueError(
            f"`{argument}` should be a sequence of positive ints. Received: `{argument}`={dims!r}"
        )
    checked = tuple(dims)
    if not checked:
        raise ValueError(f"`{argument}` is empty; give at least one dimension.")
    for dim in checked:
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim <= 0:
            raise ValueError(
                f"`{argument}` should hold positive ints; {dim!r} is not one. "
                f"Received: `{argument}`={dims!r}"
            )
        if embedding_dim is not None and dim > embedding_dim:
            raise ValueError(
                f"`{argument}` entry {dim} is larger than the embedding dimension "
                f"{embedding_dim}. Received: `{argument}`={dims!r}"
            )
    checked = tuple(int(d) for d in checked)
    repeated = sorted({d for d in checked if checked.count(d) > 1})
    if repeated:
        # The loss is a sum over the dims: a repeated one would count twice.
        raise ValueError(
            f"`{argument}` repeats {repeated}; each dimension counts once (a larger weight "
            f"counts it more). Received: `{argument}`={dims!r}"
        )
    return checked
