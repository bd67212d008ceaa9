"""Masked sum divided by the square root of the length (`pooling_mode_mean_sqrt_len_tokens`)."""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.layers.base_pooling import BasePooling
from keras_cosent.layers.base_pooling import masked_sum_and_count


@keras_cosent_export
class MeanSqrtLenPooling(BasePooling):
    """Sums the real token states and divides by the square root of their number.

    This is sentence-transformers' `pooling_mode_mean_sqrt_len_tokens`: the
    norm grows with sentence length (as `sqrt(len)`) instead of staying flat as
    with the mean. Computed in float32; all-masked rows give zeros.

    Args:
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: token states of shape `(batch, seq, dim)`.
        padding_mask: bool or 0/1 array of shape `(batch, seq)`, True for real
            tokens. `None` uses every position.

    Returns:
        A float32 tensor of shape `(batch, dim)`.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> import keras_cosent
    >>> x = np.array([[[1.0], [3.0], [5.0], [7.0], [100.0]]], dtype="float32")
    >>> mask = np.array([[1, 1, 1, 1, 0]])
    >>> keras.ops.convert_to_numpy(keras_cosent.layers.MeanSqrtLenPooling()(x, mask)).tolist()
    [[8.0]]

    Reference:
        [sentence-transformers `Pooling`](https://sbert.net/docs/package_reference/sentence_transformer/models.html#sentence_transformers.models.Pooling)
    """

    def pool(self, x, mask):
        total, count = masked_sum_and_count(x, mask)
        return total / ops.sqrt(count)
