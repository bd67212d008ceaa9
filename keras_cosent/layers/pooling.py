"""Pooling layers by name, for configs and the command line (`--pooling mean`)."""

from keras_cosent.layers.cls_pooling import CLSPooling
from keras_cosent.layers.first_last_average_pooling import FirstLastAveragePooling
from keras_cosent.layers.max_pooling import MaxPooling
from keras_cosent.layers.mean_pooling import MeanPooling
from keras_cosent.layers.mean_sqrt_len_pooling import MeanSqrtLenPooling
from keras_cosent.layers.weighted_mean_pooling import WeightedMeanPooling

POOLING_LAYERS = {
    "mean": MeanPooling,
    "cls": CLSPooling,
    "max": MaxPooling,
    "mean_sqrt_len": MeanSqrtLenPooling,
    "weighted_mean": WeightedMeanPooling,
    "first_last_avg": FirstLastAveragePooling,
}


def get_pooling(pooling, **kwargs):
    """Returns a new pooling layer for `name`.

    Args:
        pooling: one of `"mean"`, `"cls"`, `"max"`, `"mean_sqrt_len"`,
            `"weighted_mean"`, `"first_last_avg"`.
        **kwargs: passed to the layer's constructor (e.g. `name=`).

    Example:

    >>> import keras_cosent
    >>> type(keras_cosent.layers.get_pooling("mean")).__name__
    'MeanPooling'
    """
    if not isinstance(pooling, str) or pooling not in POOLING_LAYERS:
        raise ValueError(
            f"Unknown pooling {pooling!r}. Expected one of {sorted(POOLING_LAYERS)}."
        )
    return POOLING_LAYERS[pooling](**kwargs)
