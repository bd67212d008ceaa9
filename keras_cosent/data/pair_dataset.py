"""The in-memory form every reader returns: parallel text columns plus labels.

Readers in `keras_cosent.data.readers` build a `PairDataset`; `PairBatches` turns
one into padded training batches; the evaluation callback takes its `pairs` and
`labels`. Keeping one small container means every loss and recipe sees the same
layout whatever the file format was.
"""

import dataclasses

import numpy as np

from keras_cosent.utils.arguments import FLOAT32_EXACT_INTEGERS
from keras_cosent.utils.arguments import first_inexact_integer


@dataclasses.dataclass
class PairDataset:
    """Rows of two or more aligned sentences, with an optional label per row.

    Args:
        columns: one list of strings per column, all of the same length, e.g.
            `[sentences1, sentences2]` for scored pairs or
            `[anchors, positives, hard_negatives]` for InfoNCE triplets. The
            texts of the first two columns may not be blank; a negative may
            (as a corpus document may be empty).
        labels: `None` (unlabelled, e.g. SimCSE or triplets) or a 1-D numpy
            array with one label per row (float32 scores or int32 classes).
        source: where the rows came from (usually the file path).
        skipped: how many malformed rows were skipped (`on_bad_rows="skip"`).
        dropped: how many well-formed rows were left out by design (NLI rows
            without a gold label).
        classes: for int32 class ids read from class names, the names in id
            order (`read_columns(..., classes=True)`); else `None`.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.data import PairDataset
    >>> ds = PairDataset([["a", "b"], ["c", "d"]], np.array([1.0, 0.0]), "demo")
    >>> len(ds), ds.pairs[1]
    (2, ('b', 'd'))
    >>> ds.select([1]).columns
    [['b'], ['d']]
    """

    columns: list
    labels: np.ndarray = None
    source: str = ""
    skipped: int = 0
    dropped: int = 0
    classes: list = None

    def __post_init__(self):
        if isinstance(self.columns, dict):
            # Iterated, a dict gives its keys: column 0 was its first key.
            raise ValueError(
                "`columns` should be a list of text columns, not a dict (its keys would be "
                f"read as the columns); pass `list(columns.values())`. Received keys "
                f"{list(self.columns)!r:.80} (source: {self.source!r})."
            )
        if isinstance(self.columns, str) or len(self.columns) == 0:
            raise ValueError("`columns` should be a non-empty list of text columns. Received: "
                             f"`columns`={self.columns!r:.80} (source: {self.source!r}).")
        for index, column in enumerate(self.columns):
            if isinstance(column, str):
                # list("ab") would make a column of characters.
                raise ValueError(
                    f"Column {index} should be a list of texts, not one string. Received: "
                    f"{column!r:.80} (source: {self.source!r})."
                )
        self.columns = [list(column) for column in self.columns]
        for index, column in enumerate(self.columns):
            for row, text in enumerate(column):
                if not isinstance(text, str):
                    raise ValueError(
                        f"Column {index}, row {row} should be a text (str). Received: "
                        f"{text!r:.80} of type {type(text).__name__} (source: {self.source!r})."
                    )
                if index < 2 and not text.strip():
                    # The readers refuse these; trained, each is "[CLS] [SEP]", one
                    # embedding shared by every blank text. A negative (column 2
                    # on) may be blank, as a corpus document may be.
                    raise ValueError(
                        f"Column {index}, row {row} is blank. Received: {text!r:.80} "
                        f"(source: {self.source!r})."
                    )
        lengths = [len(column) for column in self.columns]
        if len(set(lengths)) != 1:
            raise ValueError(
                f"All columns of a PairDataset must have the same length. "
                f"Received column lengths {lengths} (source: {self.source!r})."
            )
        if self.labels is not None:
            self.labels = np.asarray(self.labels)
            if self.labels.ndim != 1 or len(self.labels) != lengths[0]:
                raise ValueError(
                    f"`labels` should be 1-D with one label per row ({lengths[0]}). "
                    f"Received shape {self.labels.shape} (source: {self.source!r})."
                )
            if not (np.issubdtype(self.labels.dtype, np.number)
                    or self.labels.dtype == np.bool_):
                raise ValueError(
                    f"`labels` should be numbers (scores or class ids). Received dtype "
                    f"{self.labels.dtype} (source: {self.source!r}); read class names with "
                    "`read_columns(..., classes=True)`."
                )
            inexact = first_inexact_integer(self.labels)
            if inexact is not None:
                raise ValueError(
                    f"`labels` are read in float32 by the losses, which cannot tell integers "
                    f"beyond 2**24 = {FLOAT32_EXACT_INTEGERS} apart. Received {inexact[1]} at "
                    f"row {inexact[0]} (source: {self.source!r}); renumber the class ids 0, "
                    "1, ..."
                )
            bad = np.flatnonzero(~np.isfinite(self.labels.astype("float64")))
            if bad.size:
                raise ValueError(
                    f"`labels` should be finite. Received {self.labels[bad[0]]} at row "
                    f"{bad[0]} ({bad.size} non-finite in all; source: {self.source!r})."
                )

    def __len__(self):
        return len(self.columns[0])

    @property
    def num_columns(self):
        return len(self.columns)

    @property
    def pairs(self):
        """The rows as `(sentence1, sentence2)` tuples; only for 2-column sets."""
        if self.num_columns != 2:
            raise ValueError(
                f"`pairs` needs exactly 2 columns; this dataset ({self.source!r}) "
                f"has {self.num_columns}."
            )
        return list(zip(*self.columns))

    def select(self, indices):
        """A new `PairDataset` with the rows at `indices` (in that order)."""
        indices = np.asarray(indices, dtype="int64").reshape(-1)
        columns = [[column[i] for i in indices] for column in self.columns]
        labels = None if self.labels is None else self.labels[indices]
        return PairDataset(columns, labels, self.source, classes=self.classes)
