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
        _check_shapes(self.name, inputs, padding_mask)
        x = ops.cast(inputs, "float32")
        if padding_mask is None:
            mask = ops.ones_like(x[:, :, :1])
        else:
            # Any non-zero entry is a token: the mask selects, it does not weigh.
            mask = ops.cast(ops.not_equal(padding_mask, 0), "float32")
            mask = ops.expand_dims(mask, axis=-1)
        return self.pool(x, mask)

    def pool(self, x, mask):
        raise NotImplementedError(
            f"{self.__class__.__name__} must implement `pool(x, mask)`."
        )


def _check_shapes(layer, inputs, padding_mask):
    """Refuses token states that are not `(batch, seq, dim)` or a mask that is not
    `(batch, seq)` like them, where the shapes are known (always in eager calls)."""
    x_shape = tuple(inputs.shape)
    if len(x_shape) != 3:
        raise ValueError(
            f"{layer} pools token states of shape (batch, seq, dim). Received `inputs` of "
            f"shape {x_shape}."
        )
    if padding_mask is None:
        return
    mask_shape = tuple(padding_mask.shape)
    if len(mask_shape) != 2 or any(
            a is not None and b is not None and a != b
            for a, b in zip(mask_shape, x_shape[:2])):
        raise ValueError(
            f"{layer}'s `padding_mask` should have shape (batch, seq) = {x_shape[:2]}, as "
            f"`inputs` {x_shape}. Received `padding_mask` of shape {mask_shape}."
        )


def masked_sum_and_count(x, mask):
    """Returns the masked sum over tokens `(batch, dim)` and token counts `(batch, 1)`.

    Counts are floored at 1 so that a row without any real token gives a zero
    vector rather than NaN (and a finite gradient).
    """
    total = ops.sum(x * mask, axis=1)
    count = ops.maximum(ops.sum(mask, axis=1), 1.0)
    return total, count
