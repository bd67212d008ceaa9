"""The training model of multi-dataset runs: a `SiameseEncoder` that logs each task's loss.

With a `keras_cosent.losses.MultiTaskLoss`, every batch belongs to one task;
`MultiTaskEncoder` keeps one running mean per task (`loss_<task>`, over that
task's batches only) next to Keras' `loss`, the mean over all batches; both
weigh each batch by its rows.
"""

from keras import ops

from keras_cosent import distributed
from keras_cosent.api_export import keras_cosent_export
from keras_cosent.models import compile_config
from keras_cosent.models.siamese_encoder import SiameseEncoder
from keras_cosent.models.siamese_encoder import batch_rows


@keras_cosent_export
class MultiTaskEncoder(SiameseEncoder):
    """A `SiameseEncoder` compiled with a `MultiTaskLoss`, logging `loss_<task>`.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder`.
        **kwargs: `keras.Model` keyword arguments.

    Example:

    >>> import keras_hub
    >>> import keras_cosent
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> model = keras_cosent.models.MultiTaskEncoder(
    ...     keras_cosent.models.SentenceEncoder(backbone, max_length=16))
    >>> model.compile(optimizer="adam", loss=keras_cosent.losses.MultiTaskLoss(
    ...     [keras_cosent.losses.CoSENTLoss(), keras_cosent.losses.InfoNCELoss()],
    ...     names=["sts", "nli"], columns=[2, 3]))
    >>> [tracker.name for tracker in model.task_trackers]
    ['loss_sts', 'loss_nli']
    """

    def compile(self, *args, **kwargs):
        super().compile(*args, **kwargs)
        if not callable(getattr(self.loss, "task_index", None)):
            raise ValueError(
                "MultiTaskEncoder should be compiled with a keras_cosent.losses.MultiTaskLoss. "
                f"Received: `loss`={self.loss!r}"
            )
        self.task_trackers = compile_config.loss_trackers(self.loss.names)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        trackers = getattr(self, "task_trackers", ())
        if trackers:
            # Over the gathered global batch and weighted, as the loss itself (see
            # SiameseEncoder): on a batch of one task, loss_<task> is the batch's loss.
            weight = None if sample_weight is None else distributed.gather_global(sample_weight)
            value = distributed.replica_value(lambda: self.loss.call(
                distributed.gather_global(y), distributed.gather_global(y_pred),
                sample_weight=weight))
            task = self.loss.task_index(y)
            # Keras averages `loss` over batches weighted by their rows (the first
            # input's); so is each task's, or a smaller last batch weighed more in
            # `loss_<task>` than in `loss`. Weight 0 on the other tasks' batches:
            # each mean is over its own.
            rows = ops.cast(batch_rows(x), "float32")
            for index, tracker in enumerate(trackers):
                tracker.update_state(value, sample_weight=rows * ops.cast(
                    ops.equal(task, index), "float32"))
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)
