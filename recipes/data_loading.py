"""Reads the scored pairs and BEIR folders `train` and `evaluate` are given, and the demo set.

The readers live in `keras_cosent.data`, and how a training file becomes the rows
an objective trains on lives in `keras_cosent.training.objectives`; this module
checks that an evaluation file can serve its purpose, with an error naming the
option and the file. The demo set packaged in `recipes/data/` stands in when
`train` gets no `--train` file.

Imported lazily by the commands (keras_cosent imports keras).
"""

import contextlib
import pathlib
import warnings

import numpy as np

from keras_cosent.training.objectives import COLUMN_FORMATS
from recipes.errors import CliError
from recipes.retrieval_folders import retrieval_split

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"
DEMO_TRAIN = DATA_DIR / "demo-train.tsv"
DEMO_DEV = DATA_DIR / "demo-dev.tsv"
# Formats whose rows carry no score, so there is nothing to correlate with.
UNSCORED_FORMATS = ("text-lines", "triplets-jsonl")
DEMO_FORMAT = "pair-tsv"


def _read(path, format, text_columns, label_column, **options):
    from keras_cosent.data import read_dataset

    if format in COLUMN_FORMATS:
        options.update(text_columns=list(text_columns), label_column=label_column)
    return warn_dropped(read_dataset(str(path), format, **options))


def warn_dropped(dataset):
    """`dataset`, after a warning of the rows its reader left out by design (NLI
    rows without a gold label): OCNLI's dev split has 50 of 3,000, which the row
    counts `train` and `evaluate` print left unexplained."""
    if dataset.dropped:
        warnings.warn(f"{dataset.source}: {dataset.dropped} row(s) without a gold label "
                      "('-', empty or null) left out", stacklevel=2)
    return dataset


def read_scored_pairs(path, format, text_columns=("sentence1", "sentence2"),
                      label_column="score", option="--dev"):
    """A 2-column `PairDataset` with a label per row, for evaluation."""
    if format in UNSCORED_FORMATS:
        raise CliError(
            f"{option} {path}: format {format} has no scores to evaluate against; "
            "give a scored file and its format (--eval-format for train)"
        )
    if format in COLUMN_FORMATS and label_column is None:
        raise CliError(f"{option} {path}: evaluation needs --label-column")
    if format in COLUMN_FORMATS and (len(set(text_columns)) != len(text_columns)
                                     or label_column in text_columns):
        # Every pair (s, s), or the score read as a sentence: a correlation of
        # round-off, with nothing to say it is wrong.
        raise CliError(
            f"{option} {path}: evaluation reads two different text columns and a label "
            f"column apart from them; the text columns are {','.join(text_columns)} and "
            f"the label column {label_column}"
        )
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


def read_retrieval_folder(folder, split=None, option="FOLDER", split_option="--split",
                          unknown_ids="error", env=None):
    """A `RetrievalDataset` from a BEIR folder, with errors naming `option` and the folder.

    With `env`, what the reader warns of (queries skipped, rows naming missing
    ids) is shown as `env.note`s.
    """
    from keras_cosent.data import read_beir

    split = retrieval_split(folder, split, option, split_option)
    with unknown_ids_hint(), reader_notes(env):
        try:
            dataset = read_beir(folder, split, unknown_ids=unknown_ids)
        except FileNotFoundError as error:
            raise CliError(f"{option} {folder}: {error}") from None
    if not dataset.qrels:
        raise CliError(
            f"{option} {folder}: qrels/{split}.tsv judges no query of queries.jsonl "
            "relevant to a document (score >= 1): nothing to score or train on"
        )
    return dataset


def refuse_blank_queries(dataset, option):
    """Refuses a split to score whose judged queries include a blank one, naming `option`
    and the split (`RetrievalEvaluator` refuses it too, without them)."""
    from keras_cosent.callbacks.retrieval_evaluator import blank_queries

    blank = blank_queries(dataset.queries, list(dataset.qrels))
    if blank:
        raise CliError(
            f"{option} {dataset.source}: {len(blank)} judged quer"
            f"{'y has' if len(blank) == 1 else 'ies have'} a blank text in queries.jsonl "
            f"(first: {blank[:5]}), nothing to search with; fix the text or drop the "
            "query's judgements"
        )


@contextlib.contextmanager
def reader_notes(env):
    """Shows the `UserWarning`s raised in the block as `env.note`s (none: left as warnings)."""
    if env is None:
        yield
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        if issubclass(warning.category, UserWarning):
            env.note(str(warning.message))
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)


def training_judgements(data, env, option, name=None):
    """`data` with only judgements of documents its corpus holds, saying how many went.

    `name` is the file or folder the errors show after `option` (default: `data.source`).
    """
    name = data.source if name is None else name
    if not data.qrels:
        raise CliError(f"{option} {name}: no query has a relevant document (score >= 1): "
                       "no training row")
    trainable = data.judged_in_corpus()
    dropped = (sum(len(j) for j in data.qrels.values())
               - sum(len(j) for j in trainable.qrels.values()))
    if not trainable.qrels:
        raise CliError(f"{option} {name}: every relevant document its qrels name is "
                       "missing from corpus.jsonl: no training row")
    if dropped:
        env.note(f"{option}: {dropped} judgement(s) name documents missing from the corpus "
                 "and make no training row")
    return trainable


@contextlib.contextmanager
def unknown_ids_hint():
    """Adds to a qrels row's "unknown ... id" error the option that reads past it."""
    from keras_cosent.data import DataFormatError

    try:
        yield
    except DataFormatError as error:
        if not error.reason.startswith("unknown "):
            raise
        raise DataFormatError(
            error.path, error.line,
            f"{error.reason} (--unknown-ids report reads on past such rows)",
        ) from None


def read_labelled_texts(path, format=None, text_column="text", label_column="label",
                        option="DATA"):
    """`(texts, labels)` of a csv/tsv/jsonl file, labels kept as class names.

    The label column is read as classes (`read_columns(classes=True)`), so that
    any label, a name or an integer (`"sports"`, `3`; JSON's `3` and `"3"` are
    one class), is a class and the reader's file:line errors apply.
    """
    from keras_cosent.data import read_columns

    dataset = read_columns(str(path), [text_column], label_column=label_column, format=format,
                           classes=True)
    texts = list(dataset.columns[0])
    labels = [dataset.classes[i] for i in dataset.labels.tolist()]
    if len(set(labels)) < 2:
        raise CliError(
            f"{option} {path}: every row has the label {labels[0]!r}; clustering needs "
            "at least 2 classes"
        )
    return texts, labels
