"""Masked mean pooling, the sentence-transformers default (`pooling_mode_mean_tokens`)."""

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.layers.base_pooling import BasePooling
from keras_cosent.layers.base_pooling import masked_sum_and_count


@keras_cosent_export
class MeanPooling(BasePooling):
    """Averages the token states of the real (unpadded) tokens of each sentence.

    Computed in float32 whatever the input dtype. A row whose mask is all
    False gives a zero vector.

    Args:
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: token states of shape `(batch, seq, dim)`.
        padding_mask: bool or 0/1 array of shape `(batch, seq)`, True for real
            tokens. `None` averages over every position.

    Returns:
        A float32 tensor of shape `(batch, dim)`.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> import keras_cosent
    >>> x = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]], dtype="float32")
    >>> mask = np.array([[True, True, False]])
    >>> keras.ops.convert_to_numpy(keras_cosent.layers.MeanPooling()(x, mask)).tolist()
    [[2.0, 3.0]]

    Reference:
        [Reimers and Gurevych, 2019. Sentence-BERT](https://arxiv.org/abs/1908.10084)
    """

    def pool(self, x, mask):
        total, count = masked_sum_and_count(x, mask)
        return total / count
