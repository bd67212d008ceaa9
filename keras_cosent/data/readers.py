"""Readers for STS, NLI and plain-text corpora, each returning a `PairDataset`.

Every reader decodes UTF-8 (a leading BOM is dropped, `\\r\\n` endings are
accepted, a line ended by `\\r` alone is an error), reports a malformed row as a
`DataFormatError` naming the file and the 1-based line, and with
`on_bad_rows="skip"` skips such rows instead, counts them in
`PairDataset.skipped` and emits one warning. Each text is read without its
leading and trailing whitespace (STS Benchmark's files pad some sentences with
spaces); `keras_cosent.data.read_beir` keeps BEIR's texts as written, as BEIR
does. `read_dataset` dispatches on the format names the `keras-cosent` CLI uses.
"""

import csv
import io
import json
import math
import os
import re
import sys
import warnings

import numpy as np

from keras_cosent.data.data_format_error import DataFormatError
from keras_cosent.data.json_lines import parse_json_object
from keras_cosent.data.pair_dataset import PairDataset
from keras_cosent.data.text_decoding import decode_text
from keras_cosent.utils.arguments import FLOAT32_MAX

NLI_ORDINAL_LABELS = {"entailment": 2, "neutral": 1, "contradiction": 0}
# The class names of `read_nli_jsonl`'s labels, in id order (`PairDataset.classes`).
NLI_CLASSES = sorted(NLI_ORDINAL_LABELS, key=NLI_ORDINAL_LABELS.get)
_EXTENSION_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
_ON_BAD_ROWS = ("raise", "skip")
_STS_FIELDS = "genre, file, year, id, score, sentence1, sentence2"


class _BadRows:
    """Raises on the first bad row, or counts them and warns once at the end."""

    def __init__(self, path, on_bad_rows):
        if on_bad_rows not in _ON_BAD_ROWS:
            raise ValueError(
                f"`on_bad_rows` should be one of {_ON_BAD_ROWS}. "
                f"Received: `on_bad_rows`={on_bad_rows!r}"
            )
        self.path = str(path)
        self.raise_errors = on_bad_rows == "raise"
        self.count = 0
        self.first = None

    def report(self, line, reason):
        error = DataFormatError(self.path, line, reason)
        if self.raise_errors:
            raise error
        self.count += 1
        if self.first is None:
            self.first = error

    def finish(self, columns, labels=None, dropped=0, empty="the file is empty"):
        """Builds the dataset, or fails clearly when no valid row is left."""
        if len(columns[0]) == 0:
            if self.count:
                raise DataFormatError(
                    self.path, None,
                    f"no valid rows: all {self.count} rows are malformed; first: {self.first}",
                )
            if dropped:
                raise DataFormatError(
                    self.path, None, f"no usable rows: all {dropped} rows were dropped"
                )
            raise DataFormatError(self.path, None, f"no rows: {empty}")
        if self.count:
            warnings.warn(
                f"{self.path}: skipped {self.count} malformed row(s); first: {self.first}",
                stacklevel=3,
            )
        return PairDataset(columns, labels, self.path, skipped=self.count, dropped=dropped)


# A decimal number as a data file writes it: no `1_0` (10 to float()), no digits
# of other scripts, no hex.
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


def _read_text(path):
    """Returns the whole file decoded as UTF-8, without a leading BOM
    (`decode_text`: what does not decode, or is no text, names its line)."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"Data file {str(path)!r} is a directory; give a file")
    if not os.path.exists(path):
        raise FileNotFoundError(f"Data file not found: {str(path)!r}")
    if not os.path.isfile(path):
        raise DataFormatError(path, None, "not a regular file (a pipe or a device?); "
                                          "give a file")
    with open(path, "rb") as f:
        raw = f.read()
    # A wrong encoding (GBK, Latin-1) usually breaks the whole file, so this
    # raises even with on_bad_rows="skip" rather than dropping most rows.
    text, problem = decode_text(raw)
    if problem:
        raise DataFormatError(path, *problem)
    return text


def _lines(path):
    """Yields `(line_number, line)` for the non-blank lines of a text file."""
    # str.splitlines would also split on \x0b, \x1c, \u2028 ... which may occur
    # inside sentences, so only \n (with an optional \r before it) ends a line.
    for number, line in enumerate(_read_text(path).split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            yield number, line


def _parse_label(value, name="score"):
    """Returns `(float, None)` or `(None, reason)` for a numeric label."""
    if value is None or isinstance(value, (bool, list, dict)):
        # A JSON line's null, true, list or object, written as the file wrote it.
        return None, f"{name} {json.dumps(value, ensure_ascii=False):.40} is not a number"
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # a JSON integer of hundreds of digits
            return None, f"{name} {value!r:.40} is too large for a float32 label"
    else:
        text = str(value).strip()
        special = text.lower().lstrip("+-") in ("nan", "inf", "infinity")  # refused below
        if not (_DECIMAL.fullmatch(text) or special):
            return None, f"{name} {value!r} is not a number"
        number = float(text)
    if not math.isfinite(number):
        return None, f"{name} {value!r} is not a finite number"
    if abs(number) > FLOAT32_MAX:
        # Labels are stored as float32: 1e39 would become inf there.
        return None, (f"{name} {value!r:.40} is too large for a float32 label "
                      f"(max {FLOAT32_MAX:.4g})")
    return number, None


def _header_hint(number, reason):
    """`reason`, with a hint when line 1 of a headerless format fails on its label:
    most likely a header, which the tsv/csv readers take."""
    if number == 1 and reason is not None and reason.endswith("is not a number"):
        return (f"{reason}; this format has no header line: leave it out, or read the file "
                "as 'tsv' with its columns named")
    return reason


def _check_texts(texts, names):
    """Returns a reason when a text is missing or empty, else `None`."""
    for text, name in zip(texts, names):
        if not isinstance(text, str):
            return f"{name} should be a string, found {type(text).__name__} {text!r}"
        if not text.strip():
            return f"{name} is empty"
    return None


def read_sts_benchmark(path, on_bad_rows="raise"):
    """Reads an STS Benchmark distribution file (`sts-train.csv` etc.).

    The files are TAB-separated with no header and NO quoting: quotes belong to
    the text, so they are split on TABs rather than parsed as CSV. Fields are
    genre, file, year, id, score, sentence1, sentence2; some lines carry extra
    trailing fields (source ids), which are ignored.

    Args:
        path: the file.
        on_bad_rows: `"raise"` (default) or `"skip"` malformed rows.

    Returns:
        A 2-column `PairDataset` with float32 scores in [0, 5].

    Example:

    >>> import tempfile, pathlib
    >>> from keras_cosent.data import read_sts_benchmark
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "sts.csv"
    >>> _ = path.write_text('news\\tf\\t2012\\t1\\t4.5\\tHe said "hi".\\tHe greeted.\\tx\\n')
    >>> ds = read_sts_benchmark(path)
    >>> ds.pairs, ds.labels.tolist()
    ([('He said "hi".', 'He greeted.')], [4.5])
    """
    bad = _BadRows(path, on_bad_rows)
    first, second, scores = [], [], []
    for number, line in _lines(path):
        fields = line.split("\t")
        if len(fields) < 7:
            bad.report(
                number,
                f"expected at least 7 TAB-separated fields ({_STS_FIELDS}), "
                f"found {len(fields)}",
            )
            continue
        score, reason = _parse_label(fields[4])
        reason = _header_hint(number, reason)
        if reason is None and not 0 <= score <= 5:
            reason = f"score {fields[4]!r} is outside the STS Benchmark's range [0, 5]"
        reason = reason or _check_texts(fields[5:7], ("sentence1", "sentence2"))
        if reason:
            bad.report(number, reason)
            continue
        first.append(fields[5].strip())
        second.append(fields[6].strip())
        scores.append(score)
    return bad.finish([first, second], np.asarray(scores, dtype="float32"))


def read_pair_tsv(path, on_bad_rows="raise"):
    """Reads `sentence1<TAB>sentence2<TAB>label` lines (the CoSENT / text2vec format).

    Used for the Chinese STS-B (`STS-B.train.data`), LCQMC, PAWS-X and similar
    sets. No header, no quoting; exactly three fields per line.

    Args:
        path: the file.
        on_bad_rows: `"raise"` (default) or `"skip"` malformed rows.

    Returns:
        A 2-column `PairDataset` with float32 labels (integer labels are exact).

    Example:

    >>> import tempfile, pathlib
    >>> from keras_cosent.data import read_pair_tsv
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "pairs.data"
    >>> _ = path.write_text("飞机要起飞了。\\t飞机正在起飞。\\t5\\n", encoding="utf-8")
    >>> read_pair_tsv(path).labels.tolist()
    [5.0]
    """
    bad = _BadRows(path, on_bad_rows)
    first, second, labels = [], [], []
    for number, line in _lines(path):
        fields = line.split("\t")
        if len(fields) != 3:
            bad.report(
                number,
                f"expected 3 TAB-separated fields (sentence1, sentence2, label), "
                f"found {len(fields)}",
            )
            continue
        label, reason = _parse_label(fields[2], "label")
        reason = (_header_hint(number, reason)
                  or _check_texts(fields[:2], ("sentence1", "sentence2")))
        if reason:
            bad.report(number, reason)
            continue
        first.append(fields[0].strip())
        second.append(fields[1].strip())
        labels.append(label)
    return bad.finish([first, second], np.asarray(labels, dtype="float32"))


def _missing_column_error(path, line, column, available, where="the header"):
    return DataFormatError(
        path, line,
        f"column {column!r} not found in {where}; available columns: {list(available)}",
    )


def _header_records(path, delimiter):
    """Yields `(line_number, header, fields)` for a CSV (quoted) or TSV (unquoted)."""
    if delimiter == ",":
        reader = csv.reader(io.StringIO(_read_text(path), newline=""), strict=True)
        records, previous_end = [], 0
        # The csv module refuses fields over 128 KiB by default, a limit that is
        # process-wide: lifted while this file is parsed (it is in memory
        # already), restored before any record is handed out.
        limit = csv.field_size_limit(sys.maxsize)
        try:
            for fields in reader:
                # A quoted field may span lines: report where the record starts.
                start, previous_end = previous_end + 1, reader.line_num
                if any(field.strip() for field in fields):
                    records.append((start, fields))
        except csv.Error as e:
            start = previous_end + 1
            if reader.line_num <= start:
                raise DataFormatError(path, start, f"malformed CSV: {e}") from None
            # The parser read on past the line where the record starts, the
            # usual sign of a quote opened there and never closed.
            raise DataFormatError(
                path, start, f"malformed CSV: {e} at line {reader.line_num}, in the record "
                "that starts here (a quote opened on this line and not closed?)"
            ) from None
        finally:
            csv.field_size_limit(limit)
        yield from records
    else:
        # TSV is read without quoting, like the STS files: quotes are text.
        for number, line in _lines(path):
            yield number, line.split("\t")


def read_columns(path, text_columns, label_column=None, format=None, on_bad_rows="raise",
                 classes=False):
    """Reads named text columns (and an optional label) from CSV, TSV or JSON lines.

    CSV files have a header row and standard CSV quoting; TSV files have a header
    row and no quoting (a field cannot hold a TAB or newline; quotes are text);
    JSON lines files hold one object per line, the columns being its keys.

    Labels are numbers (scores), or with `classes=True` class names: any
    non-empty string or integer (`"sports"`, `3`), numbered 0, 1, ... in the
    sorted order of their spellings, e.g. for `keras_cosent.losses.SupConLoss`.

    Args:
        path: the file.
        text_columns: names of the text columns, in order, e.g.
            `["sentence1", "sentence2"]` or `["anchor", "positive", "negative"]`.
            For unsupervised SimCSE name the same column twice.
        label_column: name of a label column, or `None`.
        format: `"csv"`, `"tsv"` or `"jsonl"`; inferred from the extension
            (`.csv`, `.tsv`, `.jsonl`, `.json`) when `None`.
        on_bad_rows: `"raise"` (default) or `"skip"` malformed rows.
        classes: read `label_column` as class names rather than numbers.

    Returns:
        A `PairDataset` with one column per `text_columns` entry and float32
        labels, int32 class ids with `classes=True` (the class names, in id
        order, in its `classes`), or `None` without `label_column`.

    Example:

    >>> import tempfile, pathlib
    >>> from keras_cosent.data import read_columns
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "pairs.csv"
    >>> _ = path.write_text('a,b,score\\n"x, y",z,0.5\\n')
    >>> ds = read_columns(path, ["a", "b"], label_column="score")
    >>> ds.pairs, ds.labels.tolist()
    ([('x, y', 'z')], [0.5])
    >>> _ = path.write_text('text,topic\\nGoal!,sport\\nVote,politics\\nOffside,sport\\n')
    >>> ds = read_columns(path, ["text"], label_column="topic", classes=True)
    >>> ds.labels.tolist(), ds.classes
    ([1, 0, 1], ['politics', 'sport'])
    """
    if isinstance(text_columns, str) or not text_columns:
        raise ValueError(
            "`text_columns` should be a non-empty list of column names. "
            f"Received: `text_columns`={text_columns!r}"
        )
    text_columns = list(text_columns)
    if format is None:
        extension = os.path.splitext(str(path))[1].lower()
        if extension not in _EXTENSION_FORMATS:
            raise ValueError(
                f"Cannot infer the format of {str(path)!r} from its extension "
                f"{extension!r}; pass `format` as one of 'csv', 'tsv', 'jsonl'."
            )
        format = _EXTENSION_FORMATS[extension]
    if format not in ("csv", "tsv", "jsonl"):
        raise ValueError(
            f"`format` should be one of 'csv', 'tsv', 'jsonl'. Received: `format`={format!r}"
        )
    bad = _BadRows(path, on_bad_rows)
    wanted = text_columns + ([label_column] if label_column is not None else [])
    columns = [[] for _ in text_columns]
    labels = []
    if format == "jsonl":
        records = _json_records(path, bad, wanted)
    else:
        records = _table_records(path, bad, wanted, "," if format == "csv" else "\t")
    parse_label = _parse_class if classes else _parse_label
    for number, values in records:
        reason = _check_texts(values[: len(text_columns)], [repr(c) for c in text_columns])
        if label_column is not None and not reason:
            label, reason = parse_label(values[-1], f"label {label_column!r}")
        if reason:
            bad.report(number, reason)
            continue
        for column, text in zip(columns, values):
            column.append(text.strip())
        if label_column is not None:
            labels.append(label)
    names = None
    if label_column is None:
        labels = None
    elif classes:
        names = sorted(set(labels))
        ids = {name: i for i, name in enumerate(names)}
        labels = np.asarray([ids[label] for label in labels], dtype="int32")
    else:
        labels = np.asarray(labels, dtype="float32")
    empty = "no data rows (the file is empty or has only a header)"
    if format == "jsonl":
        empty = "the file is empty"
    dataset = bad.finish(columns, labels, empty=empty)
    dataset.classes = names
    return dataset


def _parse_class(value, name="label"):
    """Returns `(class name, None)` or `(None, reason)` for a class label."""
    # JSON gives ints (3) and strings ("3"): both name class "3". Floats and
    # booleans are refused rather than guessed at (is 1.0 class "1"?).
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value), None
    if not isinstance(value, str):
        # A float as Python writes it; null, true, a list or an object as JSON does.
        shown = repr(value) if isinstance(value, float) else f"{json.dumps(value):.40}"
        return None, f"{name} {shown} is not a class name; expected a string or an integer"
    if not value.strip():
        return None, f"{name} is empty; expected a class name"
    return value.strip(), None


def _table_records(path, bad, wanted, delimiter):
    """Yields `(line_number, values of the wanted columns)` for CSV/TSV rows."""
    header = None
    for number, fields in _header_records(path, delimiter):
        if header is None:
            header = [field.strip() for field in fields]
            # A trailing delimiter (a spreadsheet's export) names no column: rows
            # need not fill it, as they may end in one themselves.
            while len(header) > 1 and not header[-1]:
                header.pop()
            for column in wanted:
                if column not in header:
                    raise _missing_column_error(path, number, column, header)
                if header.count(column) > 1:
                    raise DataFormatError(
                        path, number, f"column {column!r} appears {header.count(column)} "
                        f"times in the header {header}"
                    )
            positions = [header.index(column) for column in wanted]
            continue
        # Empty fields past the header's (a trailing delimiter) hold nothing.
        if len(fields) < len(header) or any(f.strip() for f in fields[len(header):]):
            bad.report(
                number, f"expected {len(header)} fields as in the header, found {len(fields)}"
            )
            continue
        yield number, [fields[i] for i in positions]


def _json_objects(path, bad):
    """Yields `(line_number, dict)` for each valid JSON-lines object."""
    for number, line in _lines(path):
        if number == 1 and line.lstrip().startswith("["):
            raise DataFormatError(
                path, 1, "looks like a JSON array; expected JSON lines (one object per line)"
            )
        record, reason = parse_json_object(line)
        if reason:
            bad.report(number, reason)
            continue
        yield number, record


def _json_records(path, bad, wanted):
    """Yields `(line_number, values of the wanted keys)` for JSON-lines rows."""
    checked = False
    for number, record in _json_objects(path, bad):
        if not checked:
            # The first object stands in for a header: a key it lacks is
            # most likely a typo in the column name, not a bad row.
            for column in wanted:
                if column not in record:
                    raise _missing_column_error(path, number, column, record.keys(),
                                                "the first object, whose keys name the columns")
            checked = True
        missing = [column for column in wanted if column not in record]
        if missing:
            bad.report(number, f"missing key(s) {missing}")
            continue
        yield number, [record[column] for column in wanted]


def read_nli_jsonl(path, mode="ordinal", on_bad_rows="raise"):
    """Reads OCNLI/SNLI-style JSON lines (`sentence1`, `sentence2`, `label`).

    The label is read from `label` (OCNLI), or from `gold_label` in rows that
    have no `label` key (SNLI and MultiNLI as distributed). Rows whose label is
    `"-"`, empty or null have no gold label: they are dropped and counted in
    `PairDataset.dropped`, not treated as errors. A row with neither key is
    malformed.

    Args:
        path: the file.
        mode: `"ordinal"` gives `(premise, hypothesis)` pairs labelled
            entailment=2 > neutral=1 > contradiction=0, for CoSENT (only the
            order matters) or a softmax classifier. `"triplets"` gives
            `(premise, entailed hypothesis, contradicting hypothesis)` columns
            for InfoNCE with hard negatives: premises are grouped by their
            text, only premises with both an entailment and a contradiction
            are used, one triplet per entailed hypothesis, its contradiction
            taken in turn from that premise's contradictions.
        on_bad_rows: `"raise"` (default) or `"skip"` malformed rows (invalid
            JSON, missing or empty sentences, a missing or unknown label).

    Returns:
        A `PairDataset`: 2 columns with int32 labels, or 3 columns without labels.

    Example:

    >>> import json, tempfile, pathlib
    >>> from keras_cosent.data import read_nli_jsonl
    >>> rows = [("p", "e", "entailment"), ("p", "c", "contradiction"), ("p", "n", "-")]
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "nli.json"
    >>> _ = path.write_text("\\n".join(json.dumps(
    ...     {"sentence1": a, "sentence2": b, "label": l}) for a, b, l in rows))
    >>> ds = read_nli_jsonl(path)
    >>> ds.labels.tolist(), ds.dropped
    ([2, 0], 1)
    >>> read_nli_jsonl(path, mode="triplets").columns
    [['p'], ['e'], ['c']]
    """
    if mode not in ("ordinal", "triplets"):
        raise ValueError(
            f"`mode` should be 'ordinal' or 'triplets'. Received: `mode`={mode!r}"
        )
    bad = _BadRows(path, on_bad_rows)
    premises, hypotheses, labels = [], [], []
    dropped = 0
    for number, record in _json_objects(path, bad):
        key = "label" if "label" in record or "gold_label" not in record else "gold_label"
        if key not in record:
            bad.report(number, f"no 'label' (or 'gold_label') key; keys: {sorted(record)}")
            continue
        label = record[key]
        if label is None or (isinstance(label, str) and label.strip() in ("", "-")):
            dropped += 1
            continue
        # A list or an object is unhashable: compared as a label, it would raise.
        if not isinstance(label, (str, int, float)) or label not in NLI_ORDINAL_LABELS:
            bad.report(
                number, f"unknown NLI label {label!r}; expected one of "
                f"{list(NLI_ORDINAL_LABELS)} or '-'"
            )
            continue
        missing = [key for key in ("sentence1", "sentence2") if key not in record]
        if missing:
            bad.report(number, f"missing key(s) {missing}")
            continue
        texts = [record["sentence1"], record["sentence2"]]
        reason = _check_texts(texts, ("sentence1", "sentence2"))
        if reason:
            bad.report(number, reason)
            continue
        premises.append(texts[0].strip())
        hypotheses.append(texts[1].strip())
        labels.append(NLI_ORDINAL_LABELS[label])
    if mode == "ordinal":
        dataset = bad.finish([premises, hypotheses], np.asarray(labels, dtype="int32"), dropped)
        # So that objectives know the labels for NLI classes without `data_format`.
        dataset.classes = list(NLI_CLASSES)
        return dataset
    by_premise = {}
    for premise, hypothesis, label in zip(premises, hypotheses, labels):
        by_premise.setdefault(premise, {2: [], 0: []}).get(label, []).append(hypothesis)
    anchors, positives, negatives = [], [], []
    for premise, groups in by_premise.items():
        contradictions = groups[0]
        if not contradictions:
            continue
        for i, entailed in enumerate(groups[2]):
            anchors.append(premise)
            positives.append(entailed)
            negatives.append(contradictions[i % len(contradictions)])
    if premises and not anchors:
        raise DataFormatError(
            path, None,
            f"no triplets: none of the {len(by_premise)} premise(s) of its {len(premises)} "
            "labelled row(s) has both an entailment and a contradiction, which "
            "mode='triplets' pairs as (premise, entailed, contradicting)",
        )
    return bad.finish([anchors, positives, negatives], None, dropped)


def read_text_lines(path, on_bad_rows="raise"):
    """Reads one sentence per line as `(sentence, sentence)` rows for unsupervised SimCSE.

    Blank lines are skipped; the two columns are the same sentences, which the
    encoder's dropout turns into two different views.

    Args:
        path: the file.
        on_bad_rows: accepted for a uniform signature; a text file has no
            malformed rows beyond undecodable bytes, which always raise.

    Returns:
        A 2-column `PairDataset` without labels.

    Example:

    >>> import tempfile, pathlib
    >>> from keras_cosent.data import read_text_lines
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
    >>> _ = path.write_text("first\\n\\n second \\n")
    >>> read_text_lines(path).columns
    [['first', 'second'], ['first', 'second']]
    """
    bad = _BadRows(path, on_bad_rows)
    texts = [line.strip() for _, line in _lines(path)]
    return bad.finish([texts, list(texts)], None)


def _read_triplets_jsonl(path, on_bad_rows="raise"):
    # The (query, positive, negatives) JSON lines of `keras-cosent mine`; their
    # reader lives with the writer (keras_cosent.data.beir).
    from keras_cosent.data.beir import read_retrieval_triplets

    if on_bad_rows != "raise":
        raise ValueError(
            "`on_bad_rows` should be 'raise' for triplets-jsonl. "
            f"Received: `on_bad_rows`={on_bad_rows!r}"
        )
    return read_retrieval_triplets(path)


_READERS = {
    "sts-benchmark": read_sts_benchmark,
    "pair-tsv": read_pair_tsv,
    "csv": read_columns,
    "tsv": read_columns,
    "jsonl": read_columns,
    "nli-jsonl": read_nli_jsonl,
    "text-lines": read_text_lines,
    "triplets-jsonl": _read_triplets_jsonl,
}
READ_FORMATS = tuple(_READERS)


def read_dataset(path, format, **options):
    """Reads `path` with the reader for `format` (the names the CLI accepts).

    Args:
        path: the file.
        format: one of `"sts-benchmark"`, `"pair-tsv"`, `"csv"`, `"tsv"`,
            `"jsonl"`, `"nli-jsonl"`, `"text-lines"`, `"triplets-jsonl"` (the
            `{"query", "positive", "negatives"}` lines `keras-cosent mine`
            writes: columns query, positive, negative_1, ...).
        **options: passed to the reader, e.g. `text_columns` and
            `label_column` for csv/tsv/jsonl, `mode` for nli-jsonl,
            `on_bad_rows` for all (triplets-jsonl takes only `"raise"`).

    Returns:
        A `PairDataset`.

    Example:

    >>> import tempfile, pathlib
    >>> from keras_cosent.data import read_dataset
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
    >>> _ = path.write_text("a sentence\\n")
    >>> len(read_dataset(path, "text-lines"))
    1
    """
    if format not in _READERS:
        raise ValueError(
            f"`format` should be one of {list(READ_FORMATS)}. Received: `format`={format!r}"
        )
    if format in ("csv", "tsv", "jsonl"):
        options["format"] = format
    return _READERS[format](path, **options)
