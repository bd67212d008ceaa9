"""The training model: one shared `SentenceEncoder` over every column of a batch.

Pair losses (CoSENT, AnglE, cosine MSE) see two columns, InfoNCE an anchor, a
positive and hard negatives. Rather than calling the encoder once per column,
`SiameseEncoder` folds the columns into the batch axis, so each step runs one
encoder call over `batch * columns` sentences (shared weights, larger matmuls),
and unfolds the embeddings afterwards.

It also takes packed batches (`keras_cosent.data.PairBatches(packing=True)`):
the sentences of all columns share rows of tokens, and the embeddings are read
back out per `(row, column)` slot (`keras_cosent.models.sequence_packing`).
"""

import keras
from keras import ops

from keras_cosent import distributed
from keras_cosent.api_export import keras_cosent_export
from keras_cosent.data.packing import PACKED_KEYS
from keras_cosent.data.packing import PER_SENTENCE_KEYS
from keras_cosent.models import compile_config
from keras_cosent.models import epoch_batches
from keras_cosent.models import sequence_packing
from keras_cosent.models.xla import resolve_jit_compile


def batch_rows(x):
    """The rows by which Keras weighs a batch's logged `loss`: the leading size of
    its first input array (with packing, the packed rows)."""
    return ops.shape(next(i for i in keras.tree.flatten(x) if i is not None))[0]


@keras_cosent_export
class SiameseEncoder(keras.Model):
    """Embeds every column of a `(batch, columns, seq)` batch with one shared encoder.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder` (or any model taking a
            dict of `(batch, seq)` arrays and returning `(batch, dim)`).
        **kwargs: `keras.Model` keyword arguments (`name`, ...).

    Call arguments:
        inputs: dict of `(batch, columns, seq)` arrays `token_ids`,
            `padding_mask` and `segment_ids`, as `keras_cosent.data.PairBatches`
            yields. All columns share one padded length. Or, for an encoder
            on a keras-hub `BertBackbone`, a packed batch
            (`PairBatches(packing=True)`): `token_ids`, `positions`,
            `segment_ids`, `pack_ids` of shape `(rows, row_length)` and
            `gather_index`, `gather_mask` of shape
            `(batch, columns, row_length)`.

    Returns:
        float32 embeddings of shape `(batch, columns, dim)`: column 0 the
        anchor / first sentence, column 1 the second sentence or positive,
        further columns hard negatives.

    Example:

    >>> import numpy as np
    >>> import keras_hub
    >>> import keras_cosent
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> encoder = keras_cosent.models.SentenceEncoder(backbone, max_length=16)
    >>> model = keras_cosent.models.SiameseEncoder(encoder)
    >>> x = {
    ...     "token_ids": np.ones((4, 2, 6), "int32"),
    ...     "padding_mask": np.ones((4, 2, 6), bool),
    ...     "segment_ids": np.zeros((4, 2, 6), "int32"),
    ... }
    >>> tuple(model(x).shape)
    (4, 2, 8)
    """

    def __init__(self, encoder, **kwargs):
        if not isinstance(encoder, keras.layers.Layer):
            raise TypeError(
                f"`encoder` should be a keras_cosent.models.SentenceEncoder (a Keras layer or "
                f"model). Received: `encoder` of type {type(encoder).__name__}"
            )
        super().__init__(**kwargs)
        self.encoder = encoder
        # Built with its encoder, before any call: Keras' BackupAndRestore restores
        # into a built model only, and TensorFlow's fit calls no model first.
        self.built = bool(encoder.built)

    def compile(self, *args, jit_compile="auto", **kwargs):
        """`keras.Model.compile`, with XLA on for TensorFlow even on CPU.

        Keras leaves `jit_compile="auto"` off on CPU-only TensorFlow; for a
        transformer train step that costs about 4x (measured with
        the speed benchmark: 3.1 vs 12.3 MiniLM pairs/s on 2 cores), since plain
        graph mode runs hundreds of small unfused kernels per step. Batches
        padded to a multiple of 8 keep the number of compiled shapes small.
        Pass `jit_compile=False` to opt out.
        """
        resolved = resolve_jit_compile(self, jit_compile, kwargs.get("run_eagerly", False))
        super().compile(*args, jit_compile=resolved, **kwargs)
        compile_config.record_jit_compile(self, jit_compile)
        # A JointLoss logs each term next to the total, as `loss_<name>`.
        terms = getattr(self.loss, "terms", None)
        names = getattr(self.loss, "names", ()) if callable(terms) else ()
        self.term_trackers = compile_config.loss_trackers(names)
        distributed.prepare_model(self)

    def fit(self, *args, **kwargs):
        """`keras.Model.fit`; batches with a `set_epoch` method (`PairBatches`,
        `MultiBatches`) serve epoch k the batches planned for epoch k
        (`keras_cosent.models.epoch_batches`)."""
        args, kwargs = epoch_batches.with_epoch_batches(super().fit, args, kwargs)
        return super().fit(*args, **kwargs)

    @property
    def metrics(self):
        # With the loss trackers `compile` made, which Keras does not track.
        return super().metrics + compile_config.untracked_metrics(self)

    def compile_from_config(self, config):
        """Compiles the model loaded from a `.keras` file as it was saved (see
        `keras_cosent.models.compile_config`)."""
        compile_config.compile_from_config(self, config)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The loss over the global batch, when a batch is split over devices.

        Under `keras_cosent.distributed.data_parallel`, each replica's
        predictions, labels and sample weights are gathered in replica order
        (`keras_cosent.distributed.gather_global`), so in-batch negatives and
        ranking pairs span every device's rows, and the returned value is
        scaled so that the replicas' gradients add up to one device's.
        """
        return distributed.global_loss(
            lambda y, y_pred, sample_weight: super(SiameseEncoder, self).compute_loss(
                x, y, y_pred, sample_weight, training=training
            ),
            y, y_pred, sample_weight,
        )

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        trackers = getattr(self, "term_trackers", ())
        if trackers:
            # Sample weights as the loss takes them, so that the weighted terms
            # sum to it.
            weight = None if sample_weight is None else distributed.gather_global(sample_weight)
            values = distributed.replica_value(lambda: self.loss.terms(
                distributed.gather_global(y), distributed.gather_global(y_pred), weight
            ))
            # Keras averages `loss` over batches weighted by their rows; so are
            # the terms, or a smaller last batch left them off the total.
            rows = batch_rows(x)
            for tracker, name in zip(trackers, self.loss.names):
                tracker.update_state(values[name], sample_weight=rows)
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def build(self, input_shape=None):
        # The encoder is a functional model, built at construction.
        self.built = True

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict) or "token_ids" not in inputs:
            raise ValueError(
                "SiameseEncoder expects a dict with `token_ids`, `padding_mask` "
                f"and `segment_ids` of shape (batch, columns, seq). Received: {inputs!r:.200}"
            )
        packed = "pack_ids" in inputs
        if packed:
            missing = [key for key in PACKED_KEYS if key not in inputs]
            if missing:
                raise ValueError(
                    f"A packed batch (it has `pack_ids`) also needs {missing}; received "
                    f"the keys {sorted(inputs)}."
                )
            key, layout, folded = "gather_index", "(batch, columns, row_length)", PER_SENTENCE_KEYS
        else:
            key, layout, folded = "token_ids", "(batch, columns, seq)", tuple(inputs)
        if len(inputs[key].shape) != 3:
            raise ValueError(
                f"SiameseEncoder expects `{key}` of shape {layout}; "
                f"received shape {tuple(inputs[key].shape)}."
            )
        for name in folded:
            # Each folded input must lay its rows out as `key` does; a mismatch failed
            # deep inside the backbone (Softmax, a reshape), naming no input.
            shape, expected = tuple(inputs[name].shape), tuple(inputs[key].shape)
            if len(shape) != 3 or any(a is not None and b is not None and a != b
                                      for a, b in zip(shape, expected)):
                raise ValueError(
                    f"SiameseEncoder expects `{name}` of the shape of `{key}`, {layout}: "
                    f"{expected}; received shape {shape}."
                )
        columns = inputs[key].shape[1]
        if columns is None:
            columns = ops.shape(inputs[key])[1]
        length = ops.shape(inputs[key])[2]
        flat = dict(inputs)
        for name in folded:
            flat[name] = ops.reshape(inputs[name], (-1, length))
        if packed:
            embeddings = sequence_packing.packed_embeddings(self.encoder, flat, training=training)
        else:
            embeddings = self.encoder(flat, training=training)
        # float32 whatever the encoder gives (a custom one under mixed precision
        # may return float16): the losses score in float32.
        return ops.cast(ops.reshape(embeddings, (-1, columns, embeddings.shape[-1])), "float32")

    def get_config(self):
        config = super().get_config()
        config.update({"encoder": keras.layers.serialize(self.encoder)})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        return cls(**config)
