"""Masked max pooling over tokens (`pooling_mode_max_tokens`)."""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.layers.base_pooling import BasePooling


@keras_cosent_export
class MaxPooling(BasePooling):
    """Takes the element-wise maximum over the real tokens of each sentence.

    Padded positions are replaced by `-inf` before the maximum, as in
    `keras_hub.models.BertTextEmbedder`; a row with no real token at all gives
    zeros instead of `-inf`. Computed in float32.

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
    >>> x = np.array([[[1.0, -2.0], [3.0, -4.0], [9.0, 9.0]]], dtype="float32")
    >>> mask = np.array([[True, True, False]])
    >>> keras.ops.convert_to_numpy(keras_cosent.layers.MaxPooling()(x, mask)).tolist()
    [[3.0, -2.0]]

    Reference:
        [Conneau et al., 2017. InferSent](https://arxiv.org/abs/1705.02364)
    """

    def pool(self, x, mask):
        valid = mask > 0.5
        masked = ops.where(valid, x, float("-inf"))
        pooled = ops.max(masked, axis=1)
        any_valid = ops.any(valid, axis=1)
        return ops.where(any_valid, pooled, ops.zeros_like(pooled))
