"""The `[CLS]` token state as the sentence vector (`pooling_mode_cls_token`)."""

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.layers.base_pooling import BasePooling


@keras_cosent_export
class CLSPooling(BasePooling):
    """Takes the state of the first token (`[CLS]`) as the sentence vector.

    The padding mask is accepted for a uniform call signature and ignored:
    the first position is a real token in right-padded batches. This is the
    raw `[CLS]` state, without BERT's pooler dense layer (SimCSE's
    `cls_before_pooler`).

    Args:
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: token states of shape `(batch, seq, dim)`.
        padding_mask: ignored; accepted so that every pooling layer is called
            the same way.

    Returns:
        A float32 tensor of shape `(batch, dim)`.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> import keras_cosent
    >>> x = np.array([[[1.0, 2.0], [3.0, 4.0]]], dtype="float32")
    >>> keras.ops.convert_to_numpy(keras_cosent.layers.CLSPooling()(x, np.array([[1, 1]]))).tolist()
    [[1.0, 2.0]]

    Reference:
        [Devlin et al., 2019. BERT](https://arxiv.org/abs/1810.04805)
    """

    def pool(self, x, mask):
        return x[:, 0, :]
