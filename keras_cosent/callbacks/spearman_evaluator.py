"""The callback that scores a sentence encoder on an STS split after every epoch.

`SpearmanEvaluator` encodes each distinct sentence of the split once, takes the
cosine of every pair and writes the corpus-level Spearman and Pearson
correlations (`keras_cosent.metrics.spearman_correlation` /
`pearson_correlation`) into the epoch logs, where `EarlyStopping`,
`ModelCheckpoint` and `History` read them.
"""

import csv
import math
import os

import keras
import numpy as np
from keras import ops

from keras_cosent.metrics import pearson_correlation
from keras_cosent.metrics import spearman_correlation
from keras_cosent.retrieval._validation import check_encoder
from keras_cosent.utils import pair_cosine
from keras_cosent.utils.arguments import check_bool
from keras_cosent.utils.arguments import check_positive_int


class SpearmanEvaluator(keras.callbacks.Callback):
    """Scores the encoder on sentence pairs with gold scores after every epoch.

    At the end of each epoch the callback encodes every distinct sentence of
    `pairs` once with `encoder.encode(texts, batch_size=batch_size)`, takes the
    cosine of each pair and computes the Spearman and Pearson correlations with
    `scores` over the whole split (ties get average ranks, as in
    `scipy.stats.spearmanr`). They are written into the epoch logs as
    `f"{name}_spearman"` and `f"{name}_pearson"`, so callbacks listed after
    this one (`keras.callbacks.EarlyStopping`, `keras.callbacks.ModelCheckpoint`
    with `monitor="sts_dev_spearman", mode="max"`) and `model.fit`'s history
    see them.

    Under data parallelism (`keras_cosent.distributed.data_parallel`) it
    scores the whole split with the current weights, in every process (each
    PyTorch rank), and logs the values one device gives.

    Args:
        pairs: non-empty sequence of `(sentence1, sentence2)` string pairs.
            Use `SpearmanEvaluator.from_dataset` for a
            `keras_cosent.data.PairDataset`.
        scores: gold similarity scores, one finite number per pair.
        name: prefix of the log keys. Defaults to `"sts_dev"`.
        encoder: object with an `encode(texts, batch_size=...)` method returning
            an `(n, dim)` array, e.g. a `keras_cosent.models.SentenceEncoder`.
            Defaults to the `encoder` attribute of the model being trained
            (that of `keras_cosent.models.SiameseEncoder`).
        batch_size: batch size passed to `encode`. Defaults to 64.
        restore_best_weights: whether `on_train_end` sets the model's weights
            back to those of the epoch with the highest Spearman correlation.
            Keeps a host copy of the weights each time the score improves. That
            copy is not part of a `ResumableTraining` backup: a resumed `fit`
            restores the best epoch it saw itself. Where a run may be resumed,
            keep the best epoch as `keras-cosent train --keep-best` does: a
            `keras.callbacks.ModelCheckpoint` on `f"{name}_spearman"`
            (`mode="max"`, `save_best_only=True`) writing into the backup
            folder, its `initial_value_threshold` the best score logged so far.
        csv_path: optional path of a CSV file to which a row `epoch, spearman,
            pearson` is appended after each epoch (header written when the file
            is new or empty). `epoch` is 0-based, as in
            `keras.callbacks.CSVLogger`. Its directory should exist already
            (checked here, not after the first epoch).
        verbose: 1 prints the scores after each epoch, 0 is silent.

    Attributes:
        history: list of `{"epoch", "spearman", "pearson"}` dicts, one per epoch
            of the current `fit` (reset at `on_train_begin`).
        best_score: highest Spearman correlation seen in the current `fit`.
        best_epoch: its 0-based epoch, or None before the first epoch.

    Example:

    ```python
    evaluator = keras_cosent.callbacks.SpearmanEvaluator.from_dataset(dev, name="sts_dev")
    siamese.fit(
        train_batches,
        epochs=4,
        callbacks=[
            # Before the callbacks that read its scores: Keras runs them in list
            # order, and one listed first finds no score (it warns and saves every
            # epoch, or never stops).
            evaluator,
            keras.callbacks.EarlyStopping(monitor="sts_dev_spearman", mode="max", patience=1),
        ],
    )
    evaluator.evaluate()  # {"spearman": ..., "pearson": ...}
    ```

    Reference:
        `sentence_transformers.evaluation.EmbeddingSimilarityEvaluator`, the
        PyTorch counterpart.
    """

    def __init__(
        self,
        pairs,
        scores,
        name="sts_dev",
        encoder=None,
        batch_size=64,
        restore_best_weights=False,
        csv_path=None,
        verbose=1,
    ):
        super().__init__()
        pairs = _validate_pairs(pairs)
        self.scores = _validate_scores(scores, len(pairs))
        if not isinstance(name, str) or not name:
            raise ValueError(f"`name` should be a non-empty string. Received: `name`={name!r}")
        batch_size = check_positive_int("batch_size", batch_size)
        restore_best_weights = check_bool("restore_best_weights", restore_best_weights)
        if verbose not in (0, 1):
            raise ValueError(f"`verbose` should be 0 or 1. Received: `verbose`={verbose!r}")
        check_encoder(encoder)
        csv_path = None if csv_path is None else _check_csv_path(csv_path)
        # Each distinct sentence is encoded once; pairs index into that list.
        position = {}
        for pair in pairs:
            for text in pair:
                position.setdefault(text, len(position))
        self.sentences = list(position)
        self.pair_index = np.asarray(
            [[position[a], position[b]] for a, b in pairs], dtype="int32"
        )
        self.name = name
        self.encoder = encoder
        self.batch_size = batch_size
        self.restore_best_weights = restore_best_weights
        self.csv_path = csv_path
        self.verbose = verbose
        self._reset_tracking()

    @classmethod
    def from_dataset(cls, dataset, name="sts_dev", **kwargs):
        """Builds the evaluator from a `keras_cosent.data.PairDataset`.

        Any object with `columns` (two lists of sentences) and `labels` (one
        score per pair) works. Other keyword arguments go to the constructor.
        """
        columns = getattr(dataset, "columns", None)
        labels = getattr(dataset, "labels", None)
        source = getattr(dataset, "source", type(dataset).__name__)
        if columns is None or len(columns) != 2:
            count = "no `columns`" if columns is None else f"{len(columns)} columns"
            raise ValueError(
                "`dataset` should have exactly two text columns (sentence1, sentence2). "
                f"Received: {count} in `dataset` from {source!r}"
            )
        if labels is None:
            raise ValueError(
                "`dataset` should have gold scores in `labels`. "
                f"Received: `labels`=None in `dataset` from {source!r}"
            )
        first, second = columns
        if len(first) != len(second):
            raise ValueError(
                "The two columns of `dataset` should have the same length. "
                f"Received: {len(first)} and {len(second)} sentences in `dataset` from {source!r}"
            )
        return cls(list(zip(first, second)), labels, name=name, **kwargs)

    def _reset_tracking(self):
        self.history = []
        self.best_score = -math.inf
        self.best_epoch = None
        self._best_weights = None

    def _resolve_encoder(self):
        # Reading `self.model` also syncs the JAX trainer's state into the
        # model's variables, which `encode` then reads.
        model = self.model
        if self.encoder is not None:
            return self.encoder
        if model is None:
            raise ValueError(
                "SpearmanEvaluator has no encoder: pass `encoder=` (an object with "
                "`encode(texts, batch_size=...)`), or use it as a callback of a model "
                "with an `encoder` attribute (keras_cosent.models.SiameseEncoder)."
            )
        encoder = getattr(model, "encoder", None)
        if encoder is None or not callable(getattr(encoder, "encode", None)):
            raise ValueError(
                "SpearmanEvaluator has no encoder: `encoder` is None and the model "
                f"being trained ({type(model).__name__}) has no `encoder` attribute with "
                "an `encode` method. Pass `encoder=` explicitly."
            )
        return encoder

    def evaluate(self):
        """Returns `{"spearman": float, "pearson": float}` for the current weights."""
        embeddings = np.asarray(
            self._resolve_encoder().encode(self.sentences, batch_size=self.batch_size)
        )
        if embeddings.ndim != 2 or embeddings.shape[0] != len(self.sentences):
            raise ValueError(
                f"`encoder.encode` should return an array of shape ({len(self.sentences)}, dim) "
                f"for {len(self.sentences)} sentences. Received shape {embeddings.shape}."
            )
        pair_embeddings = ops.take(ops.convert_to_tensor(embeddings), self.pair_index, axis=0)
        cosine = pair_cosine(pair_embeddings)
        both = ops.stack(
            [spearman_correlation(self.scores, cosine), pearson_correlation(self.scores, cosine)]
        )
        spearman, pearson = ops.convert_to_numpy(both).tolist()
        return {"spearman": spearman, "pearson": pearson}

    def on_train_begin(self, logs=None):
        self._reset_tracking()

    def on_epoch_end(self, epoch, logs=None):
        scores = self.evaluate()
        spearman, pearson = scores["spearman"], scores["pearson"]
        if logs is not None:
            logs[f"{self.name}_spearman"] = spearman
            logs[f"{self.name}_pearson"] = pearson
        self.history.append({"epoch": epoch, "spearman": spearman, "pearson": pearson})
        if spearman > self.best_score:
            self.best_score = spearman
            self.best_epoch = epoch
            if self.restore_best_weights:
                self._best_weights = self.model.get_weights()
        if self.csv_path is not None:
            self._append_csv_row(epoch, spearman, pearson)
        if self.verbose:
            # A diverged model's NaN never becomes the best: there may be none yet.
            best = ("no best yet" if self.best_epoch is None else
                    f"best spearman {self.best_score:.4f} at epoch {self.best_epoch + 1}")
            print(
                f"Epoch {epoch + 1}: {self.name}_spearman={spearman:.4f} "
                f"{self.name}_pearson={pearson:.4f} ({best})"
            )

    def on_train_end(self, logs=None):
        if self.restore_best_weights and self._best_weights is not None:
            self.model.set_weights(self._best_weights)
            if self.verbose:
                print(
                    f"Restored the weights of epoch {self.best_epoch + 1} "
                    f"({self.name}_spearman={self.best_score:.4f})."
                )

    def _append_csv_row(self, epoch, spearman, pearson):
        new_file = not os.path.exists(self.csv_path) or os.path.getsize(self.csv_path) == 0
        with open(self.csv_path, "a", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            if new_file:
                writer.writerow(["epoch", "spearman", "pearson"])
            writer.writerow([epoch, repr(spearman), repr(pearson)])


def _check_csv_path(csv_path):
    """`csv_path` as a str, refused unless it names a file in an existing directory."""
    try:
        path = os.fspath(csv_path)
    except TypeError:
        raise ValueError(
            f"`csv_path` should be a file path or None. Received: `csv_path`={csv_path!r}"
        ) from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    directory = os.path.dirname(os.path.abspath(path))
    reason = None
    if not path:
        reason = "it is empty"
    elif os.path.isdir(path):
        reason = "it is a directory"
    elif not os.path.isdir(directory):
        reason = f"there is no directory {directory!r}"
    if reason is not None:
        raise ValueError(
            f"`csv_path` should name a file in an existing directory: {reason}. "
            f"Received: `csv_path`={path!r}"
        )
    return path


def _validate_pairs(pairs):
    if isinstance(pairs, (str, bytes)) or not hasattr(pairs, "__len__"):
        raise ValueError(
            "`pairs` should be a sequence of (sentence1, sentence2) pairs. "
            f"Received: `pairs` of type {type(pairs).__name__}"
        )
    pairs = list(pairs)
    if not pairs:
        raise ValueError("`pairs` should be a non-empty sequence of pairs. Received: 0 pairs.")
    for i, pair in enumerate(pairs):
        if (
            isinstance(pair, (str, bytes))
            or not hasattr(pair, "__len__")
            or len(pair) != 2
            or not all(isinstance(text, str) for text in pair)
        ):
            raise ValueError(
                f"`pairs[{i}]` should be a (sentence1, sentence2) pair of strings. "
                f"Received: {pair!r}"
            )
    return [tuple(pair) for pair in pairs]


def _validate_scores(scores, num_pairs):
    try:
        values = np.asarray(scores, dtype="float64")
    except (TypeError, ValueError) as error:
        raise ValueError(f"`scores` should be numbers. Received: {error}") from error
    if values.ndim == 2 and values.shape[-1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ValueError(
            f"`scores` should be a vector with one score per pair. Received shape {values.shape}."
        )
    if len(values) != num_pairs:
        raise ValueError(
            "`pairs` and `scores` should have the same length. "
            f"Received: {num_pairs} pairs and {len(values)} scores."
        )
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(
            f"`scores` should be finite. Received: {values[bad[0]]} at index {bad[0]} "
            f"({bad.size} non-finite scores in all)."
        )
    if np.all(values == values[0]):
        raise ValueError(
            "`scores` should not all be equal: the correlation is then undefined. "
            f"Received: every score equal to {values[0]}."
        )
    return values.astype("float32")
