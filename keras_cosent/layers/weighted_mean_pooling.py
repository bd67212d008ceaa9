"""Position-weighted mean pooling (`pooling_mode_weightedmean_tokens`, SGPT)."""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.layers.base_pooling import BasePooling
from keras_cosent.layers.base_pooling import masked_sum_and_count


@keras_cosent_export
class WeightedMeanPooling(BasePooling):
    """Averages the real token states with weights 1, 2, ..., n by position.

    Later tokens weigh more, which suits causal (left-to-right) backbones whose
    last states have seen the whole sentence (SGPT). The weight of a real
    token is its rank among the real tokens of its row (1 for the first), so
    for right-padded batches this equals sentence-transformers'
    `pooling_mode_weightedmean_tokens` (weights = positions 1..seq), and a
    left-padded row gets the same weights as its right-padded twin.
    Computed in float32; all-masked rows give zeros.

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
    >>> x = np.array([[[3.0], [6.0], [100.0]]], dtype="float32")
    >>> mask = np.array([[1, 1, 0]])
    >>> keras.ops.convert_to_numpy(keras_cosent.layers.WeightedMeanPooling()(x, mask)).tolist()
    [[5.0]]

    Reference:
        [Muennighoff, 2022. SGPT: GPT Sentence Embeddings for Semantic Search](https://arxiv.org/abs/2202.08904)
    """

    def pool(self, x, mask):
        weights = ops.cumsum(mask, axis=1) * mask
        total, count = masked_sum_and_count(x, weights)
        return total / count
