"""The loss of multi-dataset training: each batch trained with its own task's loss.

`keras_cosent.data.MultiBatches` interleaves the batches of several datasets
and puts the task index of each batch next to its labels in `y`. `MultiTaskLoss`
reads it and applies that task's loss with `keras.ops.switch`, so one compiled
train step serves every task (TensorFlow's input pipeline needs one batch
structure for the whole run, which rules out a Python-level dispatch there).
The tasks may differ in column count: the embeddings are padded to the widest
task and each task's loss sees its own columns only. On TensorFlow, whose XLA
compiler crashes on the gradient of that switch, every task's loss is computed
and the batch's own kept (see `MultiTaskLoss.call`).
"""

import functools

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.losses._validation import WeightsPassingLoss
from keras_cosent.losses.joint_loss import _check_losses
from keras_cosent.losses.joint_loss import _check_name
from keras_cosent.losses.joint_loss import _one_per_loss


@keras_cosent_export
class MultiTaskLoss(WeightsPassingLoss):
    """Applies task `t`'s loss to a batch whose `y_true[:, 1]` is `t`.

    A `sample_weight` goes to the task's loss, which weighs its rows as it
    does alone.

    Args:
        losses: non-empty list of `keras.losses.Loss`, one per task.
        names: one short name per task (logged as `loss_<name>` by
            `keras_cosent.training.build_multi`'s model).
        columns: the number of text columns of each task's batches (2 for
            pairs, 3 for triplets...).
        name: name of the loss instance.
        reduction: Keras reduction (on the task loss, already a scalar).

    Call arguments:
        y_true: float32 `(batch, 2)`: the labels, and the task index (the
            same in every row), as `keras_cosent.data.MultiBatches` gives them.
            An index that is not one whole number in `[0, len(losses))` shared
            by every row gives a NaN loss.
        y_pred: embeddings `(batch, columns, dim)` of that task's batch, at
            least the task's `columns` (a batch with fewer gives a NaN loss;
            fewer than every task's, an error).

    Returns:
        The scalar loss of the batch's task.

    Example:

    >>> import numpy as np
    >>> import keras_cosent
    >>> cosent, triplet = keras_cosent.losses.CoSENTLoss(), keras_cosent.losses.TripletLoss()
    >>> loss = keras_cosent.losses.MultiTaskLoss([cosent, triplet], ["sts", "nli"], [2, 3])
    >>> rng = np.random.default_rng(0)
    >>> rows = rng.normal(size=(4, 3, 8)).astype("float32")
    >>> y = np.stack([np.zeros(4), np.ones(4)], axis=1).astype("float32")
    >>> bool(np.isclose(float(loss(y, rows)), float(triplet(np.zeros(4), rows))))
    True
    """

    def __init__(self, losses, names, columns, name="multi_task_loss",
                 reduction="sum_over_batch_size"):
        super().__init__(name=name, reduction=reduction)
        losses = _check_losses(losses)
        names = [_check_name(n) for n in _one_per_loss("names", names, len(losses))]
        columns = _one_per_loss("columns", columns, len(losses))
        if len(set(names)) != len(names):
            raise ValueError(f"`names` should be distinct. Received: `names`={names!r}")
        for count in columns:
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError(
                    f"`columns` should hold positive ints. Received: `columns`={columns!r}"
                )
        self.losses = losses
        self.names = tuple(names)
        self.columns = tuple(columns)

    def labels_read(self):
        return "MultiTaskLoss", "the labels and the task index"

    @staticmethod
    def task_index(y_true):
        """The batch's task index, an int32 scalar."""
        return ops.cast(ops.convert_to_tensor(y_true)[0, 1], "int32")

    def _task_loss(self, task, labels, padded, sample_weight=None):
        count = self.columns[task]
        embeddings = ops.reshape(padded[:, :count], (-1, count, padded.shape[-1]))
        if sample_weight is None:
            return ops.cast(self.losses[task](labels, embeddings), "float32")
        return ops.cast(self.losses[task](labels, embeddings, sample_weight=sample_weight),
                        "float32")

    def call(self, y_true, y_pred, sample_weight=None):
        y_true = ops.convert_to_tensor(y_true)
        shape = tuple(y_true.shape)
        if len(shape) != 2 or shape[1] not in (2, None):
            raise ValueError(
                "`MultiTaskLoss` expects `y_true` of shape (batch, 2): each row's label and "
                "the batch's task index, as `keras_cosent.data.MultiBatches` gives them. "
                f"Received shape {shape}."
            )
        y_pred = ops.convert_to_tensor(y_pred)
        width_given = y_pred.shape[1] if len(y_pred.shape) == 3 else None
        if isinstance(width_given, int) and width_given < min(self.columns):
            raise ValueError(
                f"`MultiTaskLoss` expects `y_pred` of shape (batch, columns, dim) with at "
                f"least the {min(self.columns)} columns of its narrowest task (`columns`="
                f"{list(self.columns)}). Received shape {tuple(y_pred.shape)}."
            )
        labels = y_true[:, 0]
        task = self.task_index(y_true)
        # Columns up to the widest task, filled with copies of column 0: every
        # task's loss can take its own column count, and sees real (finite,
        # normalisable) embeddings even where it is not the batch's task.
        width = max(self.columns)
        filler = ops.tile(y_pred[:, :1], (1, width, 1))
        padded = ops.concatenate([y_pred, filler], axis=1)[:, :width]
        branches = [functools.partial(self._task_loss, t, sample_weight=sample_weight)
                    for t in range(len(self.losses))]
        # `ops.switch` clamps an index out of range on JAX and PyTorch, and the
        # TensorFlow sum below gives 0: a NaN says so on every backend.
        valid = ops.logical_and(task >= 0, task < len(self.losses))
        # One whole index shared by every row: the cast to int32 truncated 0.7 to
        # task 0, and only row 0's index was read.
        indices = y_true[:, 1]
        valid = ops.logical_and(valid, ops.all(ops.equal(indices, ops.floor(indices[0]))))
        if isinstance(width_given, int):
            # A task's columns beyond y_pred's would be copies of column 0.
            fits = ops.convert_to_tensor([count <= width_given for count in self.columns])
            valid = ops.logical_and(
                valid, ops.take(fits, ops.clip(task, 0, len(self.losses) - 1)))
        return ops.where(valid, self._switch(task, branches, labels, padded), float("nan"))

    @staticmethod
    def _switch(task, branches, labels, padded):
        if keras.backend.backend() == "tensorflow":
            # XLA crashes compiling the gradient of a Case op over inputs of
            # dynamic shape (TF 2.21); every task's loss is computed instead
            # (they are cheap next to the encoder) and the batch's own is kept.
            # The others get a zero cotangent, and their inputs are real
            # embeddings, so their gradients add exactly 0.
            values = [branch(labels, padded) for branch in branches]
            return sum(
                ops.where(ops.equal(task, index), value, ops.zeros_like(value))
                for index, value in enumerate(values)
            )
        return ops.switch(task, branches, labels, padded)

    def get_config(self):
        config = super().get_config()
        config.update({
            "losses": [keras.losses.serialize(loss) for loss in self.losses],
            "names": list(self.names),
            "columns": list(self.columns),
        })
        return config
