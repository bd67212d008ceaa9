"""The shared base of the masked pooling layers in `keras_cosent.layers`.

Each pooling layer maps token states `(batch, seq, dim)` and a padding mask
`(batch, seq)` to one vector per sentence `(batch, dim)`. The base class fixes
the call signature, the float32 arithmetic and the mask handling, so that the
subclasses hold only their own reduction.
"""

import keras
from keras import ops


class BasePooling(keras.layers.Layer):
    """Base class of the masked pooling layers: float32 maths, `(x, padding_mask)` call.

    Subclasses implement `pool(x, mask)`, where `x` is float32
    `(batch, seq, dim)` and `mask` is float32 `(batch, seq, 1)` with 1 for real
    tokens. Inputs in float16 or bfloat16 are upcast first, so the sums over
    long sequences do not lose precision, and the output is always float32.

    Args:
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...). The
            dtype policy defaults to `"float32"` whatever the global policy.
    """

    def __init__(self, **kwargs):
        # Pooling has no weights; a float32 policy keeps mixed precision from
        # casting the inputs down before the reduction.
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)

    def call(self, inputs, padding_mask=None):
        x = ops.cast(inputs, "float32")
        if padding_mask is None:
            mask = ops.ones_like(x[:, :, :1])
        else:
            mask = ops.expand_dims(ops.cast(padding_mask, "float32"), axis=-1)
        return self.pool(x, mask)

    def pool(self, x, mask):
        raise NotImplementedError(
            f"{self.__class__.__name__} must implement `pool(x, mask)`."
        )


def masked_sum_and_count(x, mask):
    """Returns the masked sum over tokens `(batch, dim)` and token counts `(batch, 1)`.

    Counts are floored at 1 so that a row without any real token gives a zero
    vector rather than NaN (and a finite gradient).
    """
    total = ops.sum(x * mask, axis=1)
    count = ops.maximum(ops.sum(mask, axis=1), 1.0)
    return total, count
