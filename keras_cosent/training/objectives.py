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
import functools
import warnings
from typing import Callable
from typing import Optional

import numpy as np

from keras_cosent import losses
from keras_cosent.data.data_format_error import DataFormatError
from keras_cosent.data.pair_dataset import PairDataset
from keras_cosent.data.readers import NLI_ORDINAL_LABELS
from keras_cosent.utils.arguments import is_log_name

# Pair scores above this count as "similar" wherever an objective needs a yes/no
# label (Sentence-BERT softmax on STS scores, positives for InfoNCE): the middle of 0-5.
SIMILAR_ABOVE = 2.5
COLUMN_FORMATS = ("csv", "tsv", "jsonl")
LABEL_MODES = ("score", "group", "class")
# Below this expected share of rows with a same-class partner in their batch,
# `supcon` and `batch-hard-triplet` warn: they learn nothing from a row without one.
SUPCON_MIN_PAIRED = 0.5


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
        label_mode: what `PairBatches` yields as `y`: `"score"` (the labels),
            `"class"` (the labels as int32 class ids) or `"group"` (an id per
            row, so that duplicates are not negatives).
        unique_texts: whether a batch may hold a text only once.
        min_batch_size: the smallest batch the loss can learn from.
        wrap_model: optional `(siamese, loss) -> keras.Model` for objectives that
            train a head on top of the pair embeddings (their loss takes the
            head's output, so they cannot be wrapped in `MatryoshkaLoss`).
        check_batching: optional `(objective, dataset, batch_size) -> None`
            called by `build` with the shaped rows, to warn (or raise) when
            batches of that size would teach the loss little.

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
    check_batching: Optional[Callable] = None

    @property
    def loss_option_names(self):
        """The loss options (`options`) this objective's loss takes."""
        return tuple(self.options)

    def check_loss_options(self, options, caller="build()", own=()):
        """Refuses options with a value that this objective's loss does not take.

        A misspelt option (`temprature=`) or one of `build`'s own arguments
        misspelt (`lr=`, `epoch=`) would otherwise be dropped without a word.
        `None` values stand for "the loss's default" and are always accepted.
        """
        unknown = sorted(key for key, value in options.items()
                         if value is not None and key not in self.loss_option_names)
        if unknown:
            takes = (f"its loss options are {sorted(self.loss_option_names)}"
                     if self.loss_option_names else "it takes no loss options")
            hint = f"; {caller}'s own arguments are {', '.join(own)}" if own else ""
            raise TypeError(
                f"{caller} got {', '.join(f'`{key}`' for key in unknown)}, which objective "
                f"{self.name!r} does not take: {takes}{hint}."
            )

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
    if objective.label_mode not in LABEL_MODES:
        raise ValueError(
            f"`label_mode` should be one of {LABEL_MODES}. "
            f"Received: `label_mode`={objective.label_mode!r}"
        )
    if not is_log_name(objective.name):
        # ':' and ',' would make it a joint spec to `get_objective`, and the logs
        # name a term `loss_<name>`.
        raise ValueError(
            "An objective's `name` should be a non-empty string of letters, digits, '_' "
            f"or '-'. Received: `name`={objective.name!r}"
        )
    OBJECTIVES[objective.name] = objective
    return objective


def graded_terms(objective):
    """The names of `objective`'s terms (itself, unless joint) that train on scored
    pairs: their second sentence is graded against the first, not a view of it."""
    return [term.name for term in getattr(objective, "terms", None) or (objective,)
            if term.needs_labels and term.label_mode == "score"]


def get_objective(objective):
    """An `Objective` from its name, a joint spec (`"infonce:1.0,cosent:0.5"`), or itself."""
    if isinstance(objective, Objective):
        return objective
    if isinstance(objective, str) and (JOINT_TERM in objective or JOINT_SEPARATOR in objective):
        return joint_objective(objective)
    name = _registered_name(objective)
    if name is None:
        raise ValueError(
            f"Unknown objective {objective!r}. Expected one of {sorted(OBJECTIVES)}, or "
            "register one with keras_cosent.training.register_objective."
        )
    return OBJECTIVES[name]


def _registered_name(name):
    """The `OBJECTIVES` key `name` spells, in any case (`"CoSENT"`, as
    `keras_cosent.losses.get` reads it), or None."""
    if not isinstance(name, str):
        return None
    if name in OBJECTIVES:
        return name
    matches = [key for key in OBJECTIVES if key.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


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
    return PairDataset(dataset.columns, labels, dataset.source, classes=dataset.classes)


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


def anchor_positive_pairs(objective, dataset, data_format):
    """(anchor, positive) rows: NLI entailment pairs, scored pairs above 2.5, or
    the first two text columns of unlabelled rows (further columns are dropped)."""
    if data_format == "nli-jsonl" and dataset.labels is not None:
        entailed = np.flatnonzero(np.asarray(dataset.labels) == NLI_ORDINAL_LABELS["entailment"])
        if len(entailed) == 0:
            raise DataFormatError(
                dataset.source, None,
                f"no entailment pair, so objective {objective.name!r} has no positive pairs",
            )
        dataset = dataset.select(entailed)
        dataset.labels = None
        return dataset
    dataset = positive_rows(objective, dataset, data_format)
    if dataset.num_columns > 2:
        dataset = PairDataset(dataset.columns[:2], None, dataset.source)
    return dataset


def negative_rows(objective, dataset, data_format, negatives=None):
    """(anchor, positive, negative[, negatives...]) rows: NLI triplets or 3+ text columns.

    `negatives` fixes how many negative columns the loss takes (`None`: 1 or
    more). The losses ignore `y_true`, so the rows get zeros as labels.
    """
    count = dataset.num_columns
    wanted = "3 text columns" if negatives == 1 else "at least 3 text columns"
    if count < 3 or (negatives is not None and count != 2 + negatives):
        layout = "(anchor, positive, negative)" if negatives == 1 else (
            "(query, positive, negative[, negatives...])")
        raise DataFormatError(
            dataset.source, None,
            f"objective {objective.name!r} needs {layout} rows, {wanted}; found {count}. "
            "NLI files (nli-jsonl) give (premise, entailment, contradiction) triplets; "
            "csv/tsv/jsonl files name theirs, e.g. --text-columns anchor,positive,negative",
        )
    return PairDataset(dataset.columns, np.zeros(len(dataset), "float32"), dataset.source)


def labelled_texts(objective, dataset, data_format):
    """Texts with integer class ids: csv/tsv/jsonl files with class label columns.

    Each text column is one view of the row: name the text column twice
    (`--text-columns text,text`) for two dropout views, which gives every
    text at least one positive, its other view.
    """
    if data_format is not None and data_format not in COLUMN_FORMATS:
        raise DataFormatError(
            dataset.source, None,
            f"objective {objective.name!r} needs class-labelled text: a csv, tsv or jsonl "
            "file with a text column and a class label column (e.g. --text-columns text "
            f"--label-column label); {data_format} files have no classes",
        )
    if dataset.labels is None:
        raise DataFormatError(
            dataset.source, None, f"objective {objective.name!r} needs a class label per row"
        )
    return dataset


def warn_few_positives(objective, dataset, batch_size):
    """Warns when few rows would share their batch with a row of their class.

    With one text column, a row with no other row of its class in its batch
    has no positive and adds nothing to SupCon or batch-hard triplet (a batch
    with no positive at all has loss 0). For random batches of `batch_size` rows out of `N`, a row
    of a class with `n` rows has such a partner with probability
    `1 - (1 - (n - 1) / (N - 1)) ** (batch_size - 1)`; below
    `SUPCON_MIN_PAIRED` on average, this warns with the way out.
    """
    if dataset.num_columns > 1 or len(dataset) < 2:
        return  # every row's other view is a positive
    _, counts = np.unique(np.asarray(dataset.labels), return_counts=True)
    total = len(dataset)
    single = (1.0 - (counts - 1) / (total - 1)) ** (min(batch_size, total) - 1)
    paired = float(np.sum(counts * (1.0 - single)) / total)
    if paired < SUPCON_MIN_PAIRED:
        warnings.warn(
            f"objective {objective.name!r} on {dataset.source!r}: with {len(counts)} classes "
            f"and batch_size={batch_size}, only about {paired:.0%} of the rows share a batch "
            f"with another row of their class; {objective.name} learns nothing from the "
            "others. Raise "
            "the batch size, or name the text column twice (--text-columns text,text) so "
            "that each text's second dropout view is its positive.",
            stacklevel=3,
        )


def classification_labels(dataset, data_format):
    """Class ids and class count for the softmax classifier.

    NLI files keep their three classes, as does any dataset that names its
    classes (`PairDataset.classes`, which `read_nli_jsonl` sets, so that a
    dataset read without `data_format` is not taken for scores). Scores become
    two classes, similar (above 2.5) or not, unless every label already is 0 or 1.
    """
    labels = np.asarray(dataset.labels)
    if dataset.classes is not None:
        return _class_ids(labels, len(dataset.classes), dataset), len(dataset.classes)
    if data_format == "nli-jsonl":
        return _class_ids(labels, 3, dataset), 3
    if np.all((labels == 0) | (labels == 1)):
        return labels.astype("int32"), 2
    return (labels > SIMILAR_ABOVE).astype("int32"), 2


def _class_ids(labels, num_classes, dataset):
    """`labels` as int32 class ids, refused unless each is a whole number in
    [0, num_classes): an id past the classifier's outputs trains to a NaN loss."""
    bad = np.flatnonzero((labels != np.round(labels)) | (labels < 0) | (labels >= num_classes))
    if bad.size:
        raise ValueError(
            f"{dataset.source}: {bad.size} label(s) are not class ids 0-{num_classes - 1} "
            f"(row {bad[0] + 1}: {labels[bad[0]]!r}); the classifier has {num_classes} classes"
        )
    return labels.astype("int32")


def score_range(dataset, data_format):
    """The (min, max) label range cosine regression maps onto cosines 0..1.

    Named classes (NLI: contradiction 0 < neutral 1 < entailment 2) span their ids.
    """
    if dataset.classes is not None:
        return 0.0, float(len(dataset.classes) - 1)
    if data_format == "nli-jsonl":
        return 0.0, 2.0
    labels = np.asarray(dataset.labels, dtype="float32")
    if labels.min() >= 0 and labels.max() <= 1:
        return 0.0, 1.0
    outside = np.flatnonzero((labels < 0) | (labels > 5))
    if outside.size:
        # A target cosine above 1 or below 0 (or -1) cannot be met: the loss
        # would pull every such pair to the end of the range, silently.
        raise DataFormatError(
            dataset.source, None,
            f"cosine-mse maps scores 0-5 (or 0-1) onto cosines 0-1, but {outside.size} "
            f"row(s) score outside 0-5 (row {outside[0] + 1}: {labels[outside[0]]:g}); "
            "rescale the scores or use cosent, which needs only their order",
        )
    return 0.0, 5.0


def _triplets_from_nli(data_format):
    return {"mode": "triplets"} if data_format == "nli-jsonl" else {}


def _class_labels(data_format):
    return {"classes": True} if data_format in COLUMN_FORMATS else {}


# === The table ===


def _softmax_model(siamese, loss):
    from keras_cosent.models.softmax_classifier_model import SoftmaxClassifierModel

    return SoftmaxClassifierModel(siamese, loss.num_labels)


for _objective in (
    Objective(
        name="cosent",
        summary="CoSENT ranking of pair cosines by score (Su 2022); scored pairs",
        # Two pairs at least: a batch of one pair has no ordered couple to rank.
        loss=losses.CoSENTLoss, options=("scale",), shape=scored_pairs, min_batch_size=2,
    ),
    Objective(
        name="infonce",
        summary="InfoNCE / multiple negatives ranking: (anchor, positive[, negatives]) rows",
        loss=losses.InfoNCELoss, options=("temperature", "symmetric"),
        # Rows sharing a positive are duplicates, not negatives of each other.
        loss_kwargs=lambda d, f: {"mask_false_negatives": True},
        shape=positive_rows, reader_options=_triplets_from_nli, needs_labels=False,
        label_mode="group", unique_texts=True, min_batch_size=2,
    ),
    Objective(
        name="simcse",
        summary="unsupervised SimCSE: InfoNCE over two dropout views of each sentence",
        loss=losses.InfoNCELoss, options=("temperature", "symmetric"),
        loss_kwargs=lambda d, f: {"mask_false_negatives": True},
        shape=sentence_views, needs_labels=False, label_mode="group", unique_texts=True,
        min_batch_size=2,
    ),
    Objective(
        name="angle",
        summary="AnglE: CoSENT on angle differences in complex space (Li & Li 2023); scored pairs",
        loss=losses.AnglELoss, options=("scale",), shape=scored_pairs, min_batch_size=2,
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
    Objective(
        name="ntxent",
        summary="SimCLR's NT-Xent: (anchor, positive) pairs, every other text a negative; "
        "NLI entailments or pairs scored above 2.5",
        loss=losses.NTXentLoss, options=("temperature",), shape=anchor_positive_pairs,
        needs_labels=False, label_mode="group", unique_texts=True, min_batch_size=2,
    ),
    Objective(
        name="triplet",
        summary="triplet loss with a margin: (anchor, positive, negative) rows; NLI triplets",
        loss=losses.TripletLoss, options=("margin", "distance"),
        shape=functools.partial(negative_rows, negatives=1),
        reader_options=_triplets_from_nli, needs_labels=False,
    ),
    Objective(
        name="margin-ranking",
        summary="margin ranking of the positive above each negative: (query, positive, "
        "negatives...) rows; NLI triplets",
        loss=losses.MarginRankingLoss, options=("margin", "form", "scale"), shape=negative_rows,
        reader_options=_triplets_from_nli, needs_labels=False,
    ),
    Objective(
        name="supcon",
        summary="supervised contrastive (Khosla et al. 2020): texts with a class label column",
        loss=losses.SupConLoss, options=("temperature",), shape=labelled_texts,
        reader_options=_class_labels, label_mode="class", min_batch_size=2,
        check_batching=warn_few_positives,
    ),
    Objective(
        name="batch-hard-triplet",
        summary="batch-hard triplet (Hermans et al. 2017): each text's farthest same-class "
        "and nearest other-class text in the batch; texts with a class label column",
        loss=losses.TripletLoss, options=("margin", "distance"),
        loss_kwargs=lambda d, f: {"mining": "batch_hard"}, shape=labelled_texts,
        reader_options=_class_labels, label_mode="class", min_batch_size=2,
        check_batching=warn_few_positives,
    ),
):
    register_objective(_objective)
del _objective


# === Joint objectives: several losses on the same batch ===

JOINT_SEPARATOR = ","
JOINT_TERM = ":"
# Objectives that train on (anchor, positive) rows: in a joint objective over
# scored pairs they count the pairs scored above SIMILAR_ABOVE only.
_POSITIVE_ROW_SHAPES = (positive_rows, anchor_positive_pairs)


@dataclasses.dataclass(frozen=True)
class JointObjective(Objective):
    """Several objectives trained together on one batch: `L = sum_i w_i * L_i`.

    Built by `joint_objective` from a spec such as `"infonce:1.0,cosent:0.5"`;
    its loss is a `keras_cosent.losses.JointLoss` whose terms are logged as
    `loss_<name>`.
    """

    terms: tuple = ()
    weights: tuple = ()
    positive_above: tuple = ()

    @property
    def loss_option_names(self):
        """Every option a term takes (each term picks its own)."""
        return tuple(sorted({name for term in self.terms for name in term.loss_option_names}))

    def positive_thresholds(self, data_format=None):
        """`positive_above` for rows of `data_format`: NLI files count entailment only.

        Their labels are the ordinal classes (entailment 2, neutral 1,
        contradiction 0), none of them above the 2.5 of scores 0-5.
        """
        if data_format != "nli-jsonl":
            return self.positive_above
        entailment = NLI_ORDINAL_LABELS["entailment"] - 0.5
        return tuple(None if t is None else entailment for t in self.positive_above)

    def make_loss(self, options, dataset, data_format=None):
        thresholds = self.positive_thresholds(data_format)
        labels = None if dataset is None or dataset.labels is None else np.asarray(dataset.labels)
        term_losses = []
        for term, threshold in zip(self.terms, thresholds):
            if threshold is not None and labels is not None and not np.any(labels > threshold):
                # The term would see no positive and train nothing, silently.
                raise DataFormatError(
                    dataset.source, None,
                    f"no pair is labelled above {threshold:g}, so the joint objective's "
                    f"{term.name!r} term has no positive pairs",
                )
            loss = term.make_loss(options, dataset, data_format)
            if threshold is not None and getattr(loss, "mask_false_negatives", False):
                # The labels are scores here, not group ids.
                loss = type(loss).from_config({**loss.get_config(), "mask_false_negatives": False})
            term_losses.append(loss)
        return losses.JointLoss(
            term_losses, weights=list(self.weights), names=[t.name for t in self.terms],
            positive_above=list(thresholds),
        )


def joint_objective(spec):
    """The `JointObjective` of a spec `"name:weight,name:weight"` (weight defaults to 1).

    A weight of 0 logs its term (`loss_<name>`) without training on it; at
    least one weight must be positive.

    All terms train on one batch layout. Over scored pairs (when any term is a
    pair-ranking objective such as `cosent`), an (anchor, positive) objective
    such as `infonce` counts only the pairs scored above 2.5 as positives (in
    NLI files, the entailment pairs), while every pair's second sentence stays
    a negative; otherwise all terms must share their layout.

    Example:

    >>> from keras_cosent.training.objectives import joint_objective
    >>> objective = joint_objective("infonce:1.0,cosent:0.5")
    >>> [t.name for t in objective.terms], objective.weights, objective.positive_above
    (['infonce', 'cosent'], (1.0, 0.5), (2.5, None))
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"A joint objective should be 'name:weight,...'. Received: {spec!r}")
    terms, weights = [], []
    for part in spec.split(JOINT_SEPARATOR):
        name, _, weight = part.strip().partition(JOINT_TERM)
        name = _registered_name(name) or name
        if name not in OBJECTIVES:
            raise ValueError(
                f"Unknown objective {name!r} in the joint objective {spec!r}. Expected "
                f"names from {sorted(OBJECTIVES)}, as 'name:weight,name:weight'."
            )
        try:
            value = float(weight) if weight else 1.0
        except ValueError:
            value = float("nan")
        if not np.isfinite(value) or value < 0:
            raise ValueError(
                f"The weight of {name!r} in the joint objective {spec!r} should be a number "
                f">= 0 (0 logs the term without training on it). Received: {weight!r}"
            )
        objective = OBJECTIVES[name]
        if objective.wrap_model is not None:
            raise ValueError(
                f"{name!r} trains a head on the pair embeddings and cannot be part of a "
                f"joint objective ({spec!r})"
            )
        terms.append(objective)
        weights.append(value)
    names = [t.name for t in terms]
    if len(set(names)) != len(names):
        raise ValueError(f"The joint objective {spec!r} names an objective twice")
    if not any(weights):
        raise ValueError(
            f"The joint objective {spec!r} should give at least one term a positive weight"
        )
    scored = [t for t in terms if t.shape is scored_pairs]
    if scored:
        base = scored[0]
        thresholds = []
        for term in terms:
            if term.shape is scored_pairs:
                thresholds.append(None)
            elif term.shape in _POSITIVE_ROW_SHAPES:
                thresholds.append(SIMILAR_ABOVE)
            else:
                raise ValueError(
                    f"{term.name!r} and {base.name!r} train on different data layouts and "
                    f"cannot share a batch in the joint objective {spec!r}"
                )
    else:
        base = terms[0]
        for term in terms[1:]:
            if (term.shape, term.label_mode) != (base.shape, base.label_mode):
                raise ValueError(
                    f"{term.name!r} and {base.name!r} train on different data layouts and "
                    f"cannot share a batch in the joint objective {spec!r}"
                )
        thresholds = [None] * len(terms)
    return JointObjective(
        name=JOINT_SEPARATOR.join(f"{n}{JOINT_TERM}{w:g}" for n, w in zip(names, weights)),
        summary="joint: " + " + ".join(f"{w:g} x {n}" for n, w in zip(names, weights)),
        loss=losses.JointLoss,
        shape=base.shape,
        reader_options=base.reader_options,
        needs_labels=base.needs_labels,
        label_mode=base.label_mode,
        unique_texts=any(t.unique_texts for t in terms),
        min_batch_size=max(t.min_batch_size for t in terms),
        terms=tuple(terms),
        weights=tuple(weights),
        positive_above=tuple(thresholds),
    )
