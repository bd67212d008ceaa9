"""Pooling, normalisation and head layers that turn token states into sentence vectors.

Every pooling layer is called as `layer(sequence_output, padding_mask)` and
returns float32 `(batch, dim)`; `FirstLastAveragePooling` takes
`[first_layer_output, last_layer_output]` instead. `get_pooling(name)` builds
one from its short name. `SoftmaxClassifierHead` is the Sentence-BERT
(u, v, |u-v|) classifier used by the softmax baseline.
"""

from keras_cosent.layers.base_pooling import BasePooling
from keras_cosent.layers.cls_pooling import CLSPooling
from keras_cosent.layers.first_last_average_pooling import FirstLastAveragePooling
from keras_cosent.layers.l2_normalization import L2Normalization
from keras_cosent.layers.max_pooling import MaxPooling
from keras_cosent.layers.mean_pooling import MeanPooling
from keras_cosent.layers.mean_sqrt_len_pooling import MeanSqrtLenPooling
from keras_cosent.layers.pooling import POOLING_LAYERS
from keras_cosent.layers.pooling import get_pooling
from keras_cosent.layers.softmax_classifier_head import SoftmaxClassifierHead
from keras_cosent.layers.weighted_mean_pooling import WeightedMeanPooling

__all__ = [
    "BasePooling",
    "CLSPooling",
    "FirstLastAveragePooling",
    "L2Normalization",
    "MaxPooling",
    "MeanPooling",
    "MeanSqrtLenPooling",
    "POOLING_LAYERS",
    "get_pooling",
    "SoftmaxClassifierHead",
    "WeightedMeanPooling",
]
