"""The training objectives: which loss, on which data layout, batched how.

One table, `OBJECTIVES`, says for every objective name (the names
`keras-cosent train --loss` accepts) which loss object it builds from the run's
options, how a file read in a given format becomes its training rows, which
labels `PairBatches` must give the loss, whether texts must be unique within a
batch, and the smallest usable batch. `keras_cosent.training.build`, the CLI and
the benchmarks all read it; a new loss is usable from all of them with one
`register_objective(Objective(...))`.
"""

import dataclasses
from typing import Callable
from typing import Optional

import numpy as np

from keras_cosent import losses
from keras_cosent.data.data_format_error import DataFormatError
from keras_cosent.data.pair_dataset import PairDataset

# Pair scores above this count as "similar" wherever an objective needs a yes/no
# label (Sentence-BERT softmax on STS scores, positives for InfoNCE): the middle of 0-5.
SIMILAR_ABOVE = 2.5
COLUMN_FORMATS = ("csv", "tsv", "jsonl")


@dataclasses.dataclass(frozen=True)
class Objective:
    """One training objective: its loss and the data it trains on.

    Args:
        name: the name users pass (`keras-cosent train --loss NAME`).
        summary: one line for `--help`.
        loss: the `keras.losses.Loss` class.
        options: the builder's loss options (`scale`, `temperature`, ...) passed
            on to `loss` when given.
        loss_kwargs: optional `(dataset, data_format) -> dict` of further
            arguments of `loss`, fixed or read from the shaped training rows.
        shape: `(dataset, data_format) -> PairDataset`, the rows as read from a
            file, turned into the rows the loss trains on; raises
            `keras_cosent.data.DataFormatError` naming the file when they cannot be.
        reader_options: `data_format -> dict` of extra `read_dataset` options
            (e.g. NLI files as triplets).
        needs_labels: whether column files must name a label column.
        label_mode: what `PairBatches` yields as `y`: `"score"` (the labels) or
            `"group"` (an id per row, so that duplicates are not negatives).
        unique_texts: whether a batch may hold a text only once.
        min_batch_size: the smallest batch the loss can learn from.
        wrap_model: optional `(siamese, loss) -> keras.Model` for objectives that
            train a head on top of the pair embeddings.

    Example:

    >>> from keras_cosent.training import OBJECTIVES
    >>> OBJECTIVES["cosent"].label_mode, OBJECTIVES["infonce"].min_batch_size
    ('score', 2)
    """

    name: str
    summary: str
    loss: type
    options: tuple = ()
    loss_kwargs: Optional[Callable] = None
    shape: Optional[Callable] = None
    reader_options: Optional[Callable] = None
    needs_labels: bool = True
    label_mode: str = "score"
    unique_texts: bool = False
    min_batch_size: int = 1
    wrap_model: Optional[Callable] = None

    def make_loss(self, options, dataset, data_format=None):
        """The loss object for the run's `options` and its shaped training rows."""
        kwargs = {key: options[key] for key in self.options if options.get(key) is not None}
        if self.loss_kwargs is not None:
            kwargs.update(self.loss_kwargs(dataset, data_format))
        return self.loss(**kwargs)

    def read(self, path, data_format, text_columns=("sentence1", "sentence2"),
             label_column="score"):
        """Reads a training file in `data_format` with the reader options this objective needs.

        The rows come back as the file has them; `prepare` (which
        `keras_cosent.training.build` calls) shapes them for the loss.
        """
        from keras_cosent.data import read_dataset

        options = dict(self.reader_options(data_format)) if self.reader_options else {}
        if data_format in COLUMN_FORMATS:
            options.update(text_columns=list(text_columns),
                           label_column=label_column if self.needs_labels else None)
            if self.needs_labels and label_column is None:
                raise DataFormatError(
                    path, None, f"objective {self.name!r} needs a label column in {data_format} files"
                )
        return read_dataset(str(path), data_format, **options)

    def prepare(self, dataset, data_format=None):
        """Shapes rows already read (a `PairDataset`) for this objective."""
        return dataset if self.shape is None else self.shape(self, dataset, data_format)


OBJECTIVES = {}


def register_objective(objective):
    """Adds (or replaces) an objective in `OBJECTIVES`, by its name.

    Example:

    >>> import keras_cosent
    >>> from keras_cosent.training import Objective, register_objective
    >>> _ = register_objective(Objective(
    ...     name="cosent-scale-30", summary="CoSENT at scale 30",
    ...     loss=keras_cosent.losses.CoSENTLoss, loss_kwargs=lambda d, f: {"scale": 30.0},
    ...     shape=keras_cosent.training.objectives.scored_pairs))
    >>> "cosent-scale-30" in keras_cosent.training.OBJECTIVES
    True
    """
    if not isinstance(objective, Objective):
        raise TypeError(
            f"`objective` should be a keras_cosent.training.Objective. Received: {objective!r:.100}"
        )
    if objective.label_mode not in ("score", "group"):
        raise ValueError(
            f"`label_mode` should be 'score' or 'group'. Received: `label_mode`={objective.label_mode!r}"
        )
    OBJECTIVES[objective.name] = objective
    return objective


def get_objective(objective):
    """An `Objective` from its name (or the objective itself)."""
    if isinstance(objective, Objective):
        return objective
    if objective not in OBJECTIVES:
        raise ValueError(
            f"Unknown objective {objective!r}. Expected one of {sorted(OBJECTIVES)}, or "
            "register one with keras_cosent.training.register_objective."
        )
    return OBJECTIVES[objective]


# === How rows become training data ===


def scored_pairs(objective, dataset, data_format):
    """Two text columns and a label per row, as pair losses need.

    NLI files are read as entailment 2 > neutral 1 > contradiction 0.
    """
    if data_format == "text-lines":
        raise DataFormatError(
            dataset.source, None,
            f"objective {objective.name!r} needs scored pairs, and text-lines has no scores; "
            "use 'simcse' for plain sentences",
        )
    if dataset.num_columns != 2 or dataset.labels is None:
        raise DataFormatError(
            dataset.source, None,
            f"objective {objective.name!r} needs 2 text columns and a label, found "
            f"{dataset.num_columns} columns{'' if dataset.labels is not None else ' and no label'}",
        )
    return dataset


def classified_pairs(objective, dataset, data_format):
    """Scored pairs with class ids: NLI keeps its 3 classes, scores become similar or not."""
    dataset = scored_pairs(objective, dataset, data_format)
    labels, _ = classification_labels(dataset, data_format)
    return PairDataset(dataset.columns, labels, dataset.source)


def positive_rows(objective, dataset, data_format):
    """(anchor, positive[, negatives...]) rows: scored pair files keep pairs above 2.5."""
    if data_format == "text-lines":
        raise DataFormatError(
            dataset.source, None,
            f"objective {objective.name!r} needs (anchor, positive) rows; for plain "
            "sentences use 'simcse'",
        )
    if dataset.num_columns < 2:
        raise DataFormatError(
            dataset.source, None,
            f"objective {objective.name!r} needs at least 2 text columns, found {dataset.num_columns}",
        )
    if dataset.labels is not None:
        positives = np.flatnonzero(np.asarray(dataset.labels) > SIMILAR_ABOVE)
        if len(positives) == 0:
            raise DataFormatError(
                dataset.source, None,
                f"no pair is scored above {SIMILAR_ABOVE}, so objective {objective.name!r} "
                "has no positive pairs",
            )
        dataset = dataset.select(positives)
        dataset.labels = None
    return dataset


def sentence_views(objective, dataset, data_format):
    """Every distinct sentence of every column, twice (dropout makes the views differ)."""
    sentences = list(dict.fromkeys(s for column in dataset.columns for s in column))
    return PairDataset([sentences, list(sentences)], None, dataset.source)


def classification_labels(dataset, data_format):
    """Class ids and class count for the softmax classifier.

    NLI files keep their three classes. Scores become two classes, similar
    (above 2.5) or not, unless every label already is 0 or 1.
    """
    labels = np.asarray(dataset.labels)
    if data_format == "nli-jsonl":
        return labels.astype("int32"), 3
    if np.all((labels == 0) | (labels == 1)):
        return labels.astype("int32"), 2
    return (labels > SIMILAR_ABOVE).astype("int32"), 2


def score_range(dataset, data_format):
    """The (min, max) label range cosine regression maps onto cosines 0..1."""
    if data_format == "nli-jsonl":
        return 0.0, 2.0
    labels = np.asarray(dataset.labels, dtype="float32")
    if labels.min() >= 0 and labels.max() <= 1:
        return 0.0, 1.0
    return 0.0, 5.0


def _triplets_from_nli(data_format):
    return {"mode": "triplets"} if data_format == "nli-jsonl" else {}


# === The table ===


def _softmax_model(siamese, loss):
    from keras_cosent.models.softmax_classifier_model import SoftmaxClassifierModel

    return SoftmaxClassifierModel(siamese, loss.num_labels)


for _objective in (
    Objective(
        name="cosent",
        summary="CoSENT ranking of pair cosines by score (Su 2022); scored pairs",
        loss=losses.CoSENTLoss, options=("scale",), shape=scored_pairs,
    ),
    Objective(
        name="infonce",
        summary="InfoNCE / multiple negatives ranking: (anchor, positive[, negatives]) rows",
        loss=losses.InfoNCELoss, options=("temperature",),
        # Rows sharing a positive are duplicates, not negatives of each other.
        loss_kwargs=lambda d, f: {"mask_false_negatives": True},
        shape=positive_rows, reader_options=_triplets_from_nli, needs_labels=False,
        label_mode="group", unique_texts=True, min_batch_size=2,
    ),
    Objective(
        name="simcse",
        summary="unsupervised SimCSE: InfoNCE over two dropout views of each sentence",
        loss=losses.InfoNCELoss, options=("temperature",),
        loss_kwargs=lambda d, f: {"mask_false_negatives": True},
        shape=sentence_views, needs_labels=False, label_mode="group", unique_texts=True,
        min_batch_size=2,
    ),
    Objective(
        name="angle",
        summary="AnglE: CoSENT on angle differences in complex space (Li & Li 2023); scored pairs",
        loss=losses.AnglELoss, options=("scale",), shape=scored_pairs,
    ),
    Objective(
        name="cosine-mse",
        summary="cosine regression onto scores mapped to 0-1; scored pairs",
        loss=losses.CosineMSELoss,
        loss_kwargs=lambda d, f: dict(zip(("min_score", "max_score"), score_range(d, f))),
        shape=scored_pairs,
    ),
    Objective(
        name="sbert-softmax",
        summary="Sentence-BERT's (u, v, |u-v|) softmax classifier; NLI classes or score > 2.5",
        loss=losses.SoftmaxLoss,
        loss_kwargs=lambda d, f: {"num_labels": classification_labels(d, f)[1]},
        shape=classified_pairs, wrap_model=_softmax_model,
    ),
):
    register_objective(_objective)
del _objective
