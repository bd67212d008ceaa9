"""L2 normalisation of sentence vectors, so that dot products are cosines."""

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.utils.arguments import check_positive_float
from keras_cosent.utils.similarity import l2_normalize


@keras_cosent_export
class L2Normalization(keras.layers.Layer):
    """Scales each vector to unit L2 norm along `axis`, in float32.

    A zero vector stays zero (the norm is floored at `epsilon`).

    Args:
        axis: int, the axis to normalise. Defaults to `-1`.
        epsilon: float, floor of the norm. Defaults to `1e-12`.
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...). The
            dtype policy defaults to `"float32"`.

    Call arguments:
        inputs: a tensor, e.g. sentence vectors of shape `(batch, dim)`.

    Returns:
        A float32 tensor of the same shape with unit-norm vectors.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> import keras_cosent
    >>> x = np.array([[3.0, 4.0], [0.0, 0.0]], dtype="float32")
    >>> keras.ops.convert_to_numpy(keras_cosent.layers.L2Normalization()(x)).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """

    def __init__(self, axis=-1, epsilon=1e-12, **kwargs):
        # NaN would make every output NaN, inf every output 0.
        epsilon = check_positive_float("epsilon", epsilon)
        if isinstance(axis, bool) or not hasattr(axis, "__index__"):
            raise ValueError(f"`axis` should be an int. Received: `axis`={axis!r}")
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.axis = int(axis)
        self.epsilon = float(epsilon)

    def call(self, inputs):
        x = ops.cast(inputs, "float32")
        return l2_normalize(x, axis=self.axis, epsilon=self.epsilon)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"axis": self.axis, "epsilon": self.epsilon})
        return config
