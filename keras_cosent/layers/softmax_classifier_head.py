"""The Sentence-BERT classifier on `(u, v, |u - v|)`, trained with `SoftmaxLoss`.

It sits after `keras_cosent.models.SiameseEncoder` in the training model only;
the encoder is kept and scored by cosine, the head is discarded.
"""

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.utils.arguments import is_int


@keras_cosent_export
class SoftmaxClassifierHead(keras.layers.Layer):
    """Linear classifier on `concat(u, v, |u - v|)` of each embedding pair.

    The Sentence-BERT classification head: for the two embeddings `u`, `v` of
    a pair it returns `W [u, v, |u - v|] + b`, one logit per class. Train it
    with `keras_cosent.losses.SoftmaxLoss`. The head only exists to give the
    encoder a training signal; after training, keep the encoder and compare
    sentences with the cosine of their embeddings.

    Args:
        num_labels: int >= 2, the number of classes (3 for NLI).
        kernel_initializer: initializer of the dense kernel.
        bias_initializer: initializer of the dense bias.
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...).

    Call arguments:
        inputs: pair embeddings of shape `(batch, 2, dim)`.

    Returns:
        Logits of shape `(batch, num_labels)`.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> head = keras_cosent.layers.SoftmaxClassifierHead(num_labels=3)
    >>> pairs = np.random.normal(size=(4, 2, 8)).astype("float32")
    >>> tuple(head(pairs).shape)
    (4, 3)

    Reference:
        Reimers & Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
        BERT-Networks" (2019), https://arxiv.org/abs/1908.10084
    """

    def __init__(
        self,
        num_labels,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not is_int(num_labels) or num_labels < 2:
            raise ValueError(
                "`num_labels` should be an int >= 2. "
                f"Received: `num_labels`={num_labels!r}"
            )
        # === Config ===
        self.num_labels = int(num_labels)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        # === Layers ===
        self.dense = keras.layers.Dense(
            self.num_labels,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="classifier",
        )

    def _check_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) != 3 or input_shape[1] != 2 or input_shape[2] is None:
            raise ValueError(
                "`SoftmaxClassifierHead` expects pair embeddings of shape "
                f"(batch, 2, dim) with a known dim. Received shape {input_shape}."
            )

    def build(self, input_shape):
        self._check_shape(input_shape)
        self.dense.build((input_shape[0], 3 * input_shape[2]))

    def call(self, inputs):
        u = inputs[:, 0, :]
        v = inputs[:, 1, :]
        # |u - v| as d * sign(d): JAX's abs takes the derivative 1 at 0 (a pair of
        # identical sentences), PyTorch's and TensorFlow's 0, as the peer trains.
        difference = u - v
        return self.dense(ops.concatenate([u, v, difference * ops.sign(difference)], axis=-1))

    def compute_output_shape(self, input_shape):
        self._check_shape(input_shape)
        return (input_shape[0], self.num_labels)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_labels": self.num_labels,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
