"""`MomentumContrastModel`: a `SiameseEncoder` with MoCo's queue of momentum-encoder negatives.

Contrastive losses learn more from more negatives, and in-batch negatives cost a
forward and backward pass each. MoCo (He et al. 2020) keeps the embeddings of
the last `queue_size` positives instead, computed without gradient by a
*momentum encoder* whose weights trail the trained encoder's
(`theta_m <- mu * theta_m + (1 - mu) * theta`), so that the queued embeddings,
though computed at different steps, come from nearly the same encoder. ESimCSE
(Wu et al. 2022) adds this queue to unsupervised SimCSE.

The model is the trained `SiameseEncoder` plus that state: the momentum weights
(one non-trainable copy of each trainable encoder weight), the queue and its
write position, all Keras variables, so that they are saved with the model
(`.keras`, `save_weights`) and restored by `keras.callbacks.BackupAndRestore` and
`keras_cosent.callbacks.ResumableTraining`. Its `call` is the plain
`SiameseEncoder` one; the queue lives in `compute_loss`, which Keras calls in
every train step on every backend.
"""

import keras
import numpy as np
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses.infonce_loss import InfoNCELoss
from keras_cosent.models.siamese_encoder import SiameseEncoder

# ESimCSE's settings (Wu et al. 2022, section 4.1 and the authors' runs): momentum
# 0.995, a queue of 2.5 batches (160 sentences at batch size 64).
ESIMCSE_MOMENTUM = 0.995
ESIMCSE_QUEUE_BATCHES = 2.5


def check_queue_size(queue_size):
    """`queue_size` as an int >= 1, or a ValueError naming it."""
    if isinstance(queue_size, bool) or not isinstance(queue_size, int) and not (
        hasattr(queue_size, "__index__")
    ):
        raise ValueError(
            f"`queue_size` should be an int >= 1. Received: `queue_size`={queue_size!r}"
        )
    queue_size = int(queue_size)
    if queue_size < 1:
        raise ValueError(
            f"`queue_size` should be an int >= 1. Received: `queue_size`={queue_size!r}"
        )
    return queue_size


def check_momentum(momentum):
    """`momentum` as a float in [0, 1), or a ValueError naming it."""
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) and not (
        hasattr(momentum, "__float__")
    ):
        raise ValueError(f"`momentum` should be a float in [0, 1). Received: `momentum`={momentum!r}")
    value = float(momentum)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"`momentum` should be a float in [0, 1). Received: `momentum`={momentum!r}")
    return value


@keras_cosent_export
class MomentumContrastModel(SiameseEncoder):
    """A `SiameseEncoder` whose InfoNCE loss also contrasts against a queue of past positives.

    Every train step, in `compute_loss`:

    1. the momentum weights take one EMA step towards the encoder's current
       weights, `theta_m <- mu * theta_m + (1 - mu) * theta` (`mu` =
       `momentum`);
    2. the momentum encoder (the same network with the momentum weights, in
       inference mode, no gradient) embeds the batch's positives (column 1);
    3. the loss is `keras_cosent.losses.InfoNCELoss` with the queue as it was
       before this step as extra negatives of every anchor (empty slots left
       out);
    4. the momentum embeddings of this batch are written into the queue,
       first in first out: after `n` sentences in all, it holds the last
       `min(n, queue_size)` of them. `queue_size` need not be a multiple of
       the batch size; a batch larger than the queue leaves its last
       `queue_size` rows.

    Step 1 uses the weights left by the previous optimizer step: the update
    after optimizer step `t` is applied at the start of step `t + 1`, as in
    MoCo's and ESimCSE's code, so after `k` steps `theta_m` is the EMA of the
    weights before each of them (`theta_m = mu^k theta_0 + (1 - mu)
    sum_{j<k} mu^(k-1-j) theta_j`, starting from `theta_m = theta_0`).
    Evaluation (`model.evaluate`) computes the plain loss and changes nothing.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder`.
        queue_size: int >= 1, the number of queued negatives (ESimCSE: 2.5
            batches, `ESIMCSE_QUEUE_BATCHES`).
        momentum: float in [0, 1), `mu` above (ESimCSE: 0.995,
            `ESIMCSE_MOMENTUM`; 0 makes the momentum encoder the encoder).
        **kwargs: `keras.Model` keyword arguments.

    Call arguments:
        inputs: a batch as `SiameseEncoder` takes it (padded or packed).

    Returns:
        The embeddings `(batch, columns, dim)`, as `SiameseEncoder`.

    Example:

    >>> import numpy as np
    >>> import keras_hub
    >>> import keras_cosent
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> encoder = keras_cosent.models.SentenceEncoder(backbone, max_length=16)
    >>> model = keras_cosent.models.MomentumContrastModel(encoder, queue_size=6)
    >>> model.compile(optimizer="sgd", loss=keras_cosent.losses.InfoNCELoss())
    >>> x = {"token_ids": np.random.default_rng(0).integers(1, 10, (4, 2, 6)).astype("int32"),
    ...      "padding_mask": np.ones((4, 2, 6), bool),
    ...      "segment_ids": np.zeros((4, 2, 6), "int32")}
    >>> _ = model.train_on_batch(x, np.arange(4))
    >>> int(model.queue_count.numpy()), int(model.queue_pointer.numpy())
    (4, 4)

    Reference:
        He et al., "Momentum Contrast for Unsupervised Visual Representation
        Learning" (CVPR 2020), https://arxiv.org/abs/1911.05722 ; Wu et al.,
        "ESimCSE: Enhanced Sample Building Method for Contrastive Learning of
        Unsupervised Sentence Embedding" (COLING 2022),
        https://arxiv.org/abs/2109.04380
    """

    def __init__(self, encoder, queue_size, momentum=ESIMCSE_MOMENTUM, **kwargs):
        super().__init__(encoder, **kwargs)
        self.queue_size = check_queue_size(queue_size)
        self.momentum = check_momentum(momentum)
        # MoCo starts the momentum encoder as a copy of the encoder.
        momentum_weights = []
        for index, variable in enumerate(encoder.trainable_variables):
            weight = self.add_weight(
                shape=variable.shape, dtype=variable.dtype, initializer="zeros",
                trainable=False, autocast=False, name=f"momentum_{index}",
            )
            # A host copy: sharing the encoder variable's buffer makes JAX donate
            # it twice, and lets TensorFlow's in-place sparse (embedding)
            # updates write through to the momentum weights.
            weight.assign(np.array(ops.convert_to_numpy(variable.value), copy=True))
            momentum_weights.append(weight)
        self.momentum_weights = momentum_weights
        # Where each copied weight sits in `encoder.variables`, whose order a
        # layer's `trainable` does not change: pairing the copies with the
        # current `trainable_variables` broke (a shape error) once a layer was
        # frozen or unfrozen after this model was built.
        position = {id(variable): i for i, variable in enumerate(encoder.variables)}
        self._momentum_sources = tuple(position[id(v)] for v in encoder.trainable_variables)
        self.queue = self.add_weight(
            shape=(self.queue_size, encoder.embedding_dim), dtype="float32",
            initializer="zeros", trainable=False, autocast=False, name="queue",
        )
        # The next slot to write, and how many slots hold an embedding.
        self.queue_pointer = self.add_weight(
            shape=(), dtype="int32", initializer="zeros", trainable=False, name="queue_pointer"
        )
        self.queue_count = self.add_weight(
            shape=(), dtype="int32", initializer="zeros", trainable=False, name="queue_count"
        )

    def compile(self, *args, **kwargs):
        super().compile(*args, **kwargs)
        if not isinstance(self.loss, InfoNCELoss):
            raise ValueError(
                "MomentumContrastModel adds its queue to an InfoNCE loss; compile it with a "
                "keras_cosent.losses.InfoNCELoss (the 'infonce' or 'simcse' objective). "
                f"Received: `loss`={self.loss!r:.100}"
            )

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if not training:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        keys = self._momentum_keys(x)
        # Copies: the queue is rewritten below, and PyTorch writes variables in
        # place, which would corrupt the values saved for the backward pass.
        queue = ops.copy(self.queue.value)
        filled = ops.arange(self.queue_size, dtype="int32") < ops.copy(self.queue_count.value)
        loss = self.loss(
            y, {"embeddings": y_pred, "queue": queue, "queue_mask": filled},
            sample_weight=sample_weight,
        )
        for extra in self.losses:
            loss = loss + ops.cast(ops.sum(extra), loss.dtype)
        self._enqueue(keys)
        return loss

    def _momentum_keys(self, x):
        """EMA step of the momentum weights, then their embeddings of column 1 (no gradient)."""
        mu = self.momentum
        variables = self.encoder.variables
        sources = [variables[i] for i in self._momentum_sources]
        values = []
        for weight, variable in zip(self.momentum_weights, sources):
            value = mu * weight.value + (1.0 - mu) * ops.stop_gradient(
                ops.cast(variable.value, weight.dtype)
            )
            weight.assign(value)
            values.append(value)
        mapping = list(zip(sources, values))
        copied = set(self._momentum_sources)
        mapping += [(v, v.value) for i, v in enumerate(variables) if i not in copied]
        packed = "pack_ids" in x
        # A padded batch gives the positives' column alone; packed rows mix the
        # columns, so the whole batch is embedded and column 1 kept.
        inputs = x if packed else {key: value[:, 1:2] for key, value in x.items()}
        with keras.StatelessScope(state_mapping=mapping):
            embeddings = SiameseEncoder.call(self, inputs, training=False)
        return ops.stop_gradient(embeddings[:, 1 if packed else 0, :])

    def _enqueue(self, keys):
        """Writes `keys` (`(batch, dim)`) into the queue at its pointer, wrapping around."""
        size = self.queue_size
        keys = ops.cast(keys, "float32")
        batch = ops.cast(ops.shape(keys)[0], "int32")
        pointer = ops.convert_to_tensor(self.queue_pointer.value)
        # Slot j is `offset` places after the pointer: batch rows offset,
        # offset + size, ... land there, and the last of them stays.
        offset = ops.mod(ops.arange(size, dtype="int32") - pointer, size)
        written = offset < batch
        last = offset + size * ops.floor_divide(batch - 1 - offset, size)
        rows = ops.where(written, last, ops.zeros_like(last))
        self.queue.assign(
            ops.where(written[:, None], ops.take(keys, rows, axis=0), self.queue.value)
        )
        self.queue_pointer.assign(ops.mod(pointer + batch, size))
        self.queue_count.assign(ops.minimum(self.queue_count.value + batch, size))

    def get_config(self):
        config = super().get_config()
        config.update({"queue_size": self.queue_size, "momentum": self.momentum})
        return config
