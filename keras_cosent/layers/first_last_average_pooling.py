"""SimCSE's first-last-avg: mean over tokens of the average of two layers' states."""

from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.layers.base_pooling import BasePooling
from keras_cosent.layers.base_pooling import masked_sum_and_count


@keras_cosent_export
class FirstLastAveragePooling(BasePooling):
    """Masked mean over tokens of `(first_layer_output + last_layer_output) / 2`.

    `keras_cosent.models.SentenceEncoder` feeds it the output of the first
    transformer layer and the last one, as BERT-whitening and SimCSE's
    `avg_first_last` evaluation do. Computed in float32; all-masked rows give
    zeros.

    Args:
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a list `[first_layer_output, last_layer_output]`, each of shape
            `(batch, seq, dim)`.
        padding_mask: bool or 0/1 array of shape `(batch, seq)`, True for real
            tokens. `None` uses every position.

    Returns:
        A float32 tensor of shape `(batch, dim)`.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> import keras_cosent
    >>> first = np.array([[[1.0], [3.0], [50.0]]], dtype="float32")
    >>> last = np.array([[[3.0], [5.0], [70.0]]], dtype="float32")
    >>> layer = keras_cosent.layers.FirstLastAveragePooling()
    >>> keras.ops.convert_to_numpy(layer([first, last], np.array([[1, 1, 0]]))).tolist()
    [[3.0]]

    Reference:
        [Gao et al., 2021. SimCSE](https://arxiv.org/abs/2104.08821);
        [Su et al., 2021. Whitening Sentence Representations](https://arxiv.org/abs/2103.15316)
    """

    def call(self, inputs, padding_mask=None):
        if not isinstance(inputs, (list, tuple)) or len(inputs) != 2:
            raise ValueError(
                "`FirstLastAveragePooling` expects a list `[first_layer_output, "
                f"last_layer_output]`. Received: {inputs!r:.200}"
            )
        first_shape, last_shape = tuple(inputs[0].shape), tuple(inputs[1].shape)
        if len(first_shape) != len(last_shape) or any(
                a is not None and b is not None and a != b
                for a, b in zip(first_shape, last_shape)):
            # Else each backend's own broadcasting error, or a silent broadcast.
            raise ValueError(
                "`FirstLastAveragePooling` averages two layer outputs of one shape. "
                f"Received shapes {first_shape} and {last_shape}."
            )
        first = ops.cast(inputs[0], "float32")
        last = ops.cast(inputs[1], "float32")
        return super().call((first + last) / 2.0, padding_mask)

    def pool(self, x, mask):
        total, count = masked_sum_and_count(x, mask)
        return total / count
