"""Reads the files `train` and `evaluate` are given into what each loss needs.

The readers live in `keras_cosent.data`; this module only decides which reader
options a loss needs (NLI as ordered pairs or as triplets, SimCSE's single
sentences) and checks that a file can serve its purpose, with an error naming the
option and the file. The demo set packaged in `recipes/data/` stands in when
`train` gets no `--train` file.

Imported lazily by the commands (keras_cosent imports keras).
"""

import pathlib

import numpy as np

from recipes.errors import CliError

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"
DEMO_TRAIN = DATA_DIR / "demo-train.tsv"
DEMO_DEV = DATA_DIR / "demo-dev.tsv"
DEMO_FORMAT = "pair-tsv"
COLUMN_FORMATS = ("csv", "tsv", "jsonl")
PAIR_LOSSES = ("cosent", "angle", "cosine-mse", "sbert-softmax")
# Pair scores above this count as "similar" wherever a loss needs a yes/no
# label (Sentence-BERT softmax on STS, positives for InfoNCE): the middle of 0-5.
SIMILAR_ABOVE = 2.5


def _read(path, format, text_columns, label_column, **options):
    from keras_cosent.data import read_dataset

    if format in COLUMN_FORMATS:
        options.update(text_columns=list(text_columns), label_column=label_column)
    return read_dataset(str(path), format, **options)


def read_scored_pairs(path, format, text_columns=("sentence1", "sentence2"),
                      label_column="score", option="--dev"):
    """A 2-column `PairDataset` with a label per row, for evaluation."""
    if format == "text-lines":
        raise CliError(
            f"{option} {path}: format text-lines has no scores to evaluate against; "
            "give a scored file and its format (--eval-format for train)"
        )
    if format in COLUMN_FORMATS and label_column is None:
        raise CliError(f"{option} {path}: evaluation needs --label-column")
    dataset = _read(path, format, text_columns, label_column)
    if dataset.num_columns != 2:
        raise CliError(
            f"{option} {path}: evaluation needs 2 text columns, found {dataset.num_columns}"
        )
    if np.all(dataset.labels == dataset.labels[0]):
        raise CliError(
            f"{option} {path}: every score is {dataset.labels[0]}, so no correlation "
            "can be computed"
        )
    return dataset


def read_training_set(path, format, loss, text_columns=("sentence1", "sentence2"),
                      label_column="score"):
    """Reads `--train` for `loss`, in the layout the loss trains on.

    - pair losses (cosent, angle, cosine-mse, sbert-softmax): 2 columns and labels;
      NLI files give entailment=2 > neutral=1 > contradiction=0.
    - infonce: (anchor, positive, [hard negatives...]); NLI files give
      (premise, entailment, contradiction) triplets; scored pair files
      (sts-benchmark, pair-tsv) keep only the rows scored above 2.5, the pairs
      that are positives; csv/tsv/jsonl rows are all positives.
    - simcse: every distinct sentence of every column, as two identical columns
      (dropout makes the two views differ).
    """
    from keras_cosent.data import PairDataset

    option = "--train"
    if loss in PAIR_LOSSES:
        if format == "text-lines":
            raise CliError(
                f"{option} {path}: --loss {loss} needs scored pairs, and format "
                "text-lines has no scores; use --loss simcse for plain sentences"
            )
        if format in COLUMN_FORMATS and label_column is None:
            raise CliError(f"{option} {path}: --loss {loss} needs --label-column")
        dataset = _read(path, format, text_columns, label_column)
        if dataset.num_columns != 2 or dataset.labels is None:
            raise CliError(
                f"{option} {path}: --loss {loss} needs 2 text columns and a label, "
                f"found {dataset.num_columns} columns"
            )
        return dataset
    if loss == "infonce":
        if format == "text-lines":
            raise CliError(
                f"{option} {path}: --loss infonce needs (anchor, positive) rows; "
                "for plain sentences use --loss simcse"
            )
        options = {"mode": "triplets"} if format == "nli-jsonl" else {}
        # Column files list (anchor, positive, negatives...) and need no label.
        dataset = _read(path, format, text_columns, None, **options)
        if dataset.labels is not None:
            positives = np.flatnonzero(dataset.labels > SIMILAR_ABOVE)
            if len(positives) == 0:
                raise CliError(
                    f"{option} {path}: no pair is scored above {SIMILAR_ABOVE}, so "
                    "--loss infonce has no positive pairs"
                )
            dataset = dataset.select(positives)
            dataset.labels = None
        return dataset
    if loss == "simcse":
        dataset = _read(path, format, text_columns, None)
        sentences = list(dict.fromkeys(s for column in dataset.columns for s in column))
        return PairDataset([sentences, list(sentences)], None, dataset.source)
    raise ValueError(f"Unknown loss {loss!r}")


def classification_labels(dataset, format):
    """Class ids and class count for `--loss sbert-softmax`.

    NLI files keep their three classes. Scores become two classes, similar
    (above 2.5) or not, unless every label already is 0 or 1.
    """
    labels = np.asarray(dataset.labels)
    if format == "nli-jsonl":
        return labels.astype("int32"), 3
    if np.all((labels == 0) | (labels == 1)):
        return labels.astype("int32"), 2
    return (labels > SIMILAR_ABOVE).astype("int32"), 2


def score_range(dataset, format):
    """The (min, max) label range `cosine-mse` maps onto cosines 0..1."""
    if format == "nli-jsonl":
        return 0.0, 2.0
    labels = np.asarray(dataset.labels, dtype="float32")
    if labels.min() >= 0 and labels.max() <= 1:
        return 0.0, 1.0
    return 0.0, 5.0
