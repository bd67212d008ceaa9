"""The Sentence-BERT classification set-up: a siamese encoder, then a softmax head."""

import keras

from keras_cosent import distributed
from keras_cosent.api_export import keras_cosent_export
from keras_cosent.layers.softmax_classifier_head import SoftmaxClassifierHead
from keras_cosent.models import compile_config
from keras_cosent.models import epoch_batches
from keras_cosent.models.xla import resolve_jit_compile
from keras_cosent.utils.arguments import is_int


@keras_cosent_export
class SoftmaxClassifierModel(keras.Model):
    """A `SiameseEncoder` whose pair embeddings feed a `SoftmaxClassifierHead`.

    Sentence-BERT's NLI training (the `"sbert-softmax"` objective): the head
    classifies `(u, v, |u - v|)` into `num_labels` classes and is trained with
    `keras_cosent.losses.SoftmaxLoss`; afterwards only the encoder is kept.

    Args:
        siamese: a `keras_cosent.models.SiameseEncoder`.
        num_labels: int, the number of classes.
        **kwargs: `keras.Model` keyword arguments.

    Call arguments:
        inputs: a pair batch, as `SiameseEncoder` takes it.

    Returns:
        float32 logits of shape `(batch, num_labels)`.

    Example:

    >>> import numpy as np
    >>> import keras_hub
    >>> import keras_cosent
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> encoder = keras_cosent.models.SentenceEncoder(backbone, max_length=16)
    >>> model = keras_cosent.models.SoftmaxClassifierModel(
    ...     keras_cosent.models.SiameseEncoder(encoder), num_labels=3)
    >>> x = {"token_ids": np.ones((4, 2, 6), "int32"),
    ...      "padding_mask": np.ones((4, 2, 6), bool),
    ...      "segment_ids": np.zeros((4, 2, 6), "int32")}
    >>> tuple(model(x).shape)
    (4, 3)

    Reference:
        [Reimers and Gurevych, 2019. Sentence-BERT](https://arxiv.org/abs/1908.10084)
    """

    def __init__(self, siamese, num_labels, **kwargs):
        if not isinstance(getattr(siamese, "encoder", None), keras.layers.Layer):
            raise TypeError(
                "`siamese` should be a keras_cosent.models.SiameseEncoder: wrap the sentence "
                "encoder, `SoftmaxClassifierModel(SiameseEncoder(encoder), num_labels)`. "
                f"Received: `siamese` of type {type(siamese).__name__}"
            )
        if not is_int(num_labels) or num_labels < 2:
            # Checked before int(): 2.7 became 2, "three" gave int()'s own message.
            raise ValueError(
                f"`num_labels` should be an int >= 2. Received: `num_labels`={num_labels!r}"
            )
        super().__init__(**kwargs)
        self.siamese = siamese
        self.encoder = siamese.encoder
        self.num_labels = int(num_labels)
        self.head = SoftmaxClassifierHead(self.num_labels)

    def compile(self, *args, jit_compile="auto", **kwargs):
        """`keras.Model.compile`, readying the model for data-parallel training.

        The head is built here (its input is the encoder's embeddings), so
        that under PyTorch ranks every weight starts from rank 0's values and
        has its gradient averaged over the ranks
        (`keras_cosent.distributed.prepare_model`). As `SiameseEncoder.compile`,
        `jit_compile="auto"` turns XLA on for TensorFlow even on CPU.
        """
        resolved = resolve_jit_compile(self, jit_compile, kwargs.get("run_eagerly", False))
        super().compile(*args, jit_compile=resolved, **kwargs)
        # Saved as given, so that "auto" resolves afresh on the backend that loads it.
        compile_config.record_jit_compile(self, jit_compile)
        embedding_dim = getattr(self.encoder, "embedding_dim", None)
        if not self.head.built and embedding_dim is not None:
            self.head.build((None, 2, embedding_dim))
        if self.head.built and self.siamese.built:
            self.built = True  # for Keras' BackupAndRestore, as SiameseEncoder
        distributed.prepare_model(self)

    def fit(self, *args, **kwargs):
        """`keras.Model.fit`; batches with a `set_epoch` method (`PairBatches`,
        `MultiBatches`) serve epoch k the batches planned for epoch k
        (`keras_cosent.models.epoch_batches`)."""
        args, kwargs = epoch_batches.with_epoch_batches(super().fit, args, kwargs)
        return super().fit(*args, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The loss over the global batch, when a batch is split over devices.

        As `SiameseEncoder.compute_loss`: every replica returns (and logs) the
        mean over all the devices' pairs, scaled so that the replicas'
        gradients add up to one device's.
        """
        return distributed.global_loss(
            lambda y, y_pred, sample_weight: super(SoftmaxClassifierModel, self).compute_loss(
                x, y, y_pred, sample_weight, training=training
            ),
            y, y_pred, sample_weight,
        )

    def compile_from_config(self, config):
        """Compiles a loaded model through `compile` (Keras skips models that override
        it: `keras_cosent.models.compile_config`)."""
        compile_config.compile_from_config(self, config)

    def call(self, inputs, training=None):
        return self.head(self.siamese(inputs, training=training), training=training)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"siamese": keras.layers.serialize(self.siamese), "num_labels": self.num_labels}
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["siamese"] = keras.layers.deserialize(config["siamese"])
        return cls(**config)
