"""Retrieval data in the BEIR layout, and (query, positive, negatives...) JSON lines.

A BEIR folder holds `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl`
(`_id`, `text`) and `qrels/<split>.tsv` (header `query-id corpus-id score`).
As BEIR's evaluation does, a document's text is `title + " " + text` when the
title is non-empty, else `text`.
"""

import collections.abc
import dataclasses
import json
import os
import re
import warnings

from keras_cosent.data.data_format_error import DataFormatError
from keras_cosent.data.json_lines import parse_json_object
from keras_cosent.data.pair_dataset import PairDataset
from keras_cosent.data.text_decoding import decode_text
from keras_cosent.utils.arguments import is_int

_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclasses.dataclass
class RetrievalDataset:
    """Corpus, queries and relevance judgements of one retrieval split.

    Args:
        corpus: `{doc_id: text}` (titles already joined).
        queries: `{query_id: text}`, only queries with a relevant document.
        qrels: `{query_id: {doc_id: int relevance}}`.
        source: the folder.
        skipped: ids of judged queries skipped for having no relevant document.
        unknown_ids: the reader's `unknown_ids` mode. With `"report"`, `qrels`
            may judge documents that `corpus` lacks (kept, relevant and never
            retrieved, as BEIR's evaluation counts them), and
            `keras_cosent.callbacks.RetrievalEvaluator.from_dataset` scores
            them so; with `"error"` (the default, and a dataset built by hand)
            it refuses them.
    """

    corpus: dict
    queries: dict
    qrels: dict
    source: str = ""
    skipped: list = dataclasses.field(default_factory=list)
    unknown_ids: str = "error"

    @property
    def corpus_ids(self):
        return list(self.corpus)

    @property
    def query_ids(self):
        return list(self.queries)

    @property
    def shared_ids(self):
        """Ids of queries that are also corpus ids (in BEIR's ArguAna and Quora, every query)."""
        return [q for q in self.queries if q in self.corpus]

    def judged_in_corpus(self):
        """This split with only the judgements of documents that the corpus holds.

        `read_beir(..., unknown_ids="report")` keeps judgements of documents
        missing from the corpus, as BEIR's evaluation does (relevant, never
        retrieved); they cannot make training rows or mined negatives. Queries
        left with no relevant document are dropped and added to `skipped`.
        """
        qrels = {q: {d: s for d, s in judged.items() if d in self.corpus}
                 for q, judged in self.qrels.items()}
        dropped = [q for q, judged in qrels.items() if not any(s >= 1 for s in judged.values())]
        qrels = {q: judged for q, judged in qrels.items() if q not in dropped}
        return RetrievalDataset(
            corpus=self.corpus, queries={q: self.queries[q] for q in qrels}, qrels=qrels,
            source=self.source, skipped=self.skipped + dropped, unknown_ids=self.unknown_ids,
        )


def _text_lines(path):
    r"""Yields `(line_number, line)` for each line of a UTF-8 file, read lazily.

    A leading BOM (files saved on Windows carry one) is dropped. Only `\n` ends
    a line (a trailing `\r` is removed), so line numbers are those `sed -n`
    shows and a `\u2028` inside a field does not split the row. Bytes that are
    not UTF-8, a `\r` alone, a NUL or a BOM past the start raise a
    `DataFormatError` naming the line (`decode_text`) instead of a bare
    `UnicodeDecodeError` or a row that is not the file's.
    """
    with open(path, "rb") as f:
        for line_number, raw in enumerate(f, start=1):
            line, problem = decode_text(raw, leading_bom=line_number == 1)
            if problem:
                raise DataFormatError(path, line_number, problem[1])
            yield line_number, line.removesuffix("\n").removesuffix("\r")


def _json_objects(path):
    """Yields `(line_number, object)` for each non-blank line of a JSON-lines file."""
    for line_number, line in _text_lines(path):
        if not line.strip():
            continue
        row, reason = parse_json_object(line)
        if reason:
            raise DataFormatError(path, line_number, reason)
        yield line_number, row


def _read_jsonl(path, fields):
    rows = {}
    for line_number, row in _json_objects(path):
        if "_id" not in row or str(row["_id"]).strip() == "":
            raise DataFormatError(path, line_number, "missing or empty `_id`")
        if isinstance(row["_id"], bool) or not isinstance(row["_id"], (str, int)):
            # str() would make ids of them: null the id "None", true "True".
            raise DataFormatError(path, line_number,
                                  f"`_id` should be a string or an integer, got {row['_id']!r:.60}")
        doc_id = str(row["_id"])
        if doc_id in rows:
            raise DataFormatError(path, line_number, f"duplicate `_id` {doc_id!r}")
        if "text" not in row:
            # BEIR requires it; a row without it is another layout (Pyserini's
            # `contents`), not an empty document.
            raise DataFormatError(path, line_number, f"missing `text` (keys: {sorted(row)})")
        values = []
        for field in fields:
            value = row.get(field, "")
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise DataFormatError(
                    path, line_number, f"`{field}` should be a string, got {value!r:.60}"
                )
            values.append(value)
        rows[doc_id] = values
    if not rows:
        raise DataFormatError(path, None, "no rows")
    return rows


def read_beir(folder, split="test", unknown_ids="error"):
    """Reads a BEIR-layout folder into a `RetrievalDataset`.

    Raises `DataFormatError` naming file and line for malformed JSON, a missing
    or duplicate `_id`, a wrong qrels header, an unknown id in qrels, a
    non-integer score or a (query, document) pair judged twice with different
    scores; a row that repeats an earlier one with the same score is read once
    and counted in a warning (published qrels files carry such repeats). Judged
    queries with no document of score >= 1 are skipped, listed in `skipped` and
    reported with a warning.

    Published sets are not always consistent: BEIR's ArguAna judges a document
    that its corpus lacks. `unknown_ids="report"` reads on past such rows with
    one warning that counts them and names the first: a row naming an unknown
    query is left out (there is no text to search with); a row naming an
    unknown document is kept, as BEIR's evaluation keeps it, so that the
    document counts as relevant and is never retrieved
    (`RetrievalDataset.judged_in_corpus` drops those for training). The
    dataset records the mode in `unknown_ids`, from which
    `RetrievalEvaluator.from_dataset` learns to score such documents so
    rather than refuse them.

    Example:

    >>> from keras_cosent.data import read_beir
    >>> ds = read_beir("/work/shared/data/retrieval/stsb-en-dev", "dev")  # doctest: +SKIP
    >>> len(ds.queries), len(ds.corpus)  # doctest: +SKIP
    (262, 1467)
    """
    folder = os.fspath(folder)
    corpus_path = os.path.join(folder, "corpus.jsonl")
    queries_path = os.path.join(folder, "queries.jsonl")
    qrels_path = os.path.join(folder, "qrels", f"{split}.tsv")
    for path in (corpus_path, queries_path, qrels_path):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"BEIR folder {folder!r} has no {os.path.relpath(path, folder)}")
    return read_retrieval_files(corpus_path, queries_path, qrels_path, source=folder,
                                unknown_ids=unknown_ids)


def read_retrieval_files(corpus_path, queries_path, qrels_path=None, source=None,
                         unknown_ids="error"):
    """Reads BEIR-format files named one by one into a `RetrievalDataset`.

    The files need not sit in a BEIR folder (`read_beir` reads one); checks,
    errors and `unknown_ids` are the same. Without `qrels_path`, every query is
    kept and `qrels` is empty (the caller pairs queries with documents some
    other way).
    """
    if unknown_ids not in ("error", "report"):
        raise ValueError(
            f"`unknown_ids` should be 'error' or 'report'. Received: unknown_ids={unknown_ids!r}"
        )
    source = os.fspath(source if source is not None else queries_path)
    corpus = {
        d: (f"{title} {text}" if title.strip() else text)
        for d, (title, text) in _read_jsonl(corpus_path, ("title", "text")).items()
    }
    all_queries = {q: text for q, (text,) in _read_jsonl(queries_path, ("text",)).items()}
    qrels = {}
    if qrels_path is None:
        return RetrievalDataset(corpus, all_queries, qrels, source=source,
                                unknown_ids=unknown_ids)
    unknown = {"query": [], "document": []}
    first_lines, repeats = {}, []
    header_read = False
    for line_number, line in _text_lines(qrels_path):
        fields = line.split("\t")
        if line_number == 1:
            header_read = True
            if [x.strip() for x in fields] != ["query-id", "corpus-id", "score"]:
                raise DataFormatError(
                    # The line as it is: stripped, a trailing TAB looked like no mistake.
                    qrels_path, 1, f"header should be 'query-id\\tcorpus-id\\tscore', got {line!r}"
                )
            continue
        if not line.strip():
            continue
        if len(fields) != 3:
            raise DataFormatError(
                qrels_path, line_number, f"expected 3 tab-separated fields, got {len(fields)}"
            )
        # Ids are compared exactly, as BEIR's loader does: `_id`s are not stripped either.
        qid, did, score = fields[0], fields[1], fields[2].strip()
        for kind, key, known in (("query", qid, all_queries), ("document", did, corpus)):
            if key not in known:
                if unknown_ids == "error":
                    name = "query id" if kind == "query" else "corpus id"
                    # Only on this error path: the id that spaces alone keep apart,
                    # around either side's.
                    near = next((k for k in known if k.strip() == key.strip()), None)
                    hint = (f" ({'queries' if kind == 'query' else 'corpus'}.jsonl has "
                            f"{near!r}: ids are compared exactly)" if near is not None else "")
                    raise DataFormatError(qrels_path, line_number,
                                          f"unknown {name} {key!r}{hint}")
                unknown[kind].append((line_number, key))
                break  # a row of an unknown query is left out whatever its document
        # Not int() alone: it reads `1_0` as 10 and digits of other scripts.
        if not _INTEGER.fullmatch(score):
            raise DataFormatError(qrels_path, line_number, f"score {score!r} is not an integer")
        # Bounded before int(), which refuses more than 4300 digits with a ValueError.
        if len(score.lstrip("+-").lstrip("0")) > 9:
            raise DataFormatError(
                qrels_path, line_number,
                f"score {score!r:.40} is out of range for a relevance grade (|score| < 10**9)"
            )
        value = int(score)
        judged = qrels.setdefault(qid, {})
        if did in judged:
            first = first_lines[qid, did]
            if judged[did] != value:
                raise DataFormatError(
                    qrels_path, line_number,
                    f"({qid!r}, {did!r}) judged {value} here and {judged[did]} on line {first}",
                )
            repeats.append((line_number, first))
            continue
        first_lines[qid, did] = line_number
        judged[did] = value
    if not header_read:
        # Not even the header: an empty file, most likely a failed write or copy.
        raise DataFormatError(qrels_path, None,
                              "empty file; expected the header 'query-id\\tcorpus-id\\tscore' "
                              "and one judgement per line")
    qrels = {q: judged for q, judged in qrels.items() if q in all_queries}
    files = {"query": queries_path, "document": corpus_path}
    # Read for training too (mining, --train-retrieval), which says what it makes of them.
    outcome = {"query": "left out", "document": "kept as judged (scoring counts such a "
               "document relevant and never retrieved, as BEIR's evaluation does)"}
    reports = [
        f"{len(rows)} row(s) name a {kind} missing from {os.path.basename(files[kind])} "
        f"(first: line {rows[0][0]}, {rows[0][1]!r}), {outcome[kind]}"
        for kind, rows in unknown.items() if rows
    ]
    if repeats:
        reports.append(
            f"{len(repeats)} row(s) repeat an earlier judgement with the same score "
            f"(first: line {repeats[0][0]} repeats line {repeats[0][1]}), read once"
        )
    if reports:
        warnings.warn(f"{qrels_path}: " + "; ".join(reports), stacklevel=2)
    skipped = [q for q, judged in qrels.items() if not any(s >= 1 for s in judged.values())]
    if skipped:
        warnings.warn(
            f"{qrels_path}: {len(skipped)} judged "
            + ("query has no relevant document and is" if len(skipped) == 1
               else "queries have no relevant document and are")
            + f" skipped (first: {skipped[:5]})",
            stacklevel=2,
        )
    for q in skipped:
        del qrels[q]
    queries = {q: all_queries[q] for q in qrels}
    return RetrievalDataset(corpus, queries, qrels, source=source, skipped=skipped,
                            unknown_ids=unknown_ids)


def hold_out_queries(dataset, size, seed=0, distractors=2500):
    """Splits a `RetrievalDataset` into (train, dev) by holding out `size` queries.

    For retrieval sets with no dev split: `size` judged queries, drawn with
    `seed`, become the dev split. Dev keeps their judged documents and up to
    `distractors` other documents of the corpus (drawn with the same
    generator), a corpus small enough to score after every epoch. Train keeps
    the other queries and drops the documents that only dev queries judge, so
    training sees none of those, neither as a positive nor as a mined
    negative; a document that a train query judges too stays in train (STS-B's
    retrieval sets have a few answers shared by two queries). Corpus order is
    kept on both sides.

    Args:
        dataset: the `RetrievalDataset` to split.
        size: int, how many queries to hold out; at least 1, and fewer than the
            dataset's queries so that some are left to train on.
        seed: int, seeds the choice of queries and distractors.
        distractors: int, documents outside the dev queries' judgements added to
            the dev corpus (all of them if fewer).

    Returns:
        `(train, dev)`, two `RetrievalDataset`s.

    Example:

    >>> from keras_cosent.data import RetrievalDataset, hold_out_queries
    >>> ds = RetrievalDataset(
    ...     corpus={f"d{i}": f"document {i}" for i in range(6)},
    ...     queries={"q0": "a", "q1": "b", "q2": "c"},
    ...     qrels={"q0": {"d0": 1}, "q1": {"d1": 1, "d0": 1}, "q2": {"d2": 1}})
    >>> train, dev = hold_out_queries(ds, 1, seed=0, distractors=2)
    >>> sorted(dev.queries), sorted(train.queries)
    (['q2'], ['q0', 'q1'])
    >>> "d2" in train.corpus, len(dev.corpus)
    (False, 3)
    """
    import numpy as np

    judged = sorted(dataset.qrels)
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size < len(judged):
        raise ValueError(
            f"`size` should be an int from 1 to {len(judged) - 1}: {dataset.source or 'the set'} "
            f"has {len(judged)} queries with a relevant document and some must be left to "
            f"train on. Received: size={size!r}"
        )
    if not isinstance(distractors, int) or isinstance(distractors, bool) or distractors < 0:
        raise ValueError(
            f"`distractors` should be a non-negative int. Received: distractors={distractors!r}"
        )
    rng = np.random.default_rng(seed)
    dev_ids = set(rng.choice(judged, size=size, replace=False).tolist())
    train_docs = {d for q in judged if q not in dev_ids for d in dataset.qrels[q]}
    dev_docs = {d for q in dev_ids for d in dataset.qrels[q]}
    dev_only = dev_docs - train_docs
    others = sorted(d for d in dataset.corpus if d not in dev_docs)
    dev_docs |= set(
        rng.choice(others, size=min(distractors, len(others)), replace=False).tolist()
    )

    def part(keep_query, keep_doc, name):
        return RetrievalDataset(
            corpus={d: t for d, t in dataset.corpus.items() if keep_doc(d)},
            queries={q: t for q, t in dataset.queries.items() if keep_query(q)},
            qrels={q: dict(j) for q, j in dataset.qrels.items() if keep_query(q)},
            source=f"{dataset.source} ({name}: {size} queries held out with seed {seed})",
            unknown_ids=dataset.unknown_ids,
        )

    return (
        part(lambda q: q not in dev_ids, lambda d: d not in dev_only, "train"),
        part(lambda q: q in dev_ids, lambda d: d in dev_docs, "dev"),
    )


def write_retrieval_triplets(rows, path):
    """Writes rows `[query, positive, negative...]` as JSON lines
    `{"query", "positive", "negatives": [...]}`.

    Every row is checked before the file is opened, so a bad row leaves no
    half-written file: each is a list or tuple of at least 2 strings that UTF-8
    can write (no lone surrogates), the query and the positive non-empty (a
    negative may be an empty string, as a corpus document may be). Raises
    `ValueError` naming the row and the field.
    """
    if isinstance(rows, (str, bytes)) or not isinstance(rows, collections.abc.Iterable):
        raise ValueError(
            "`rows` should be a sequence of [query, positive, negative...] lists. "
            f"Received: `rows` of type {type(rows).__name__}"
        )
    rows = list(rows)
    for i, row in enumerate(rows):
        if not isinstance(row, (list, tuple)) or len(row) < 2:
            raise ValueError(
                f"`rows[{i}]` should be a list [query, positive, negative...] of at least a "
                f"query and a positive. Received: {row!r:.100}"
            )
        for j, text in enumerate(row):
            field = ("query", "positive")[j] if j < 2 else f"negative {j - 1}"
            if not isinstance(text, str):
                raise ValueError(
                    f"`rows[{i}]` should hold strings; its {field} is "
                    f"{type(text).__name__} {text!r:.60}"
                )
            if j < 2 and not text.strip():
                raise ValueError(f"`rows[{i}]` has an empty {field}: {row!r:.100}")
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:
                raise ValueError(
                    f"`rows[{i}]` has a {field} that is not valid Unicode text "
                    f"({e.reason} at character {e.start}): {text!r:.60}"
                ) from None
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            record = {"query": row[0], "positive": row[1], "negatives": list(row[2:])}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def _holds_texts(value):
    """Whether a JSON value is a text or a non-empty list of texts."""
    if isinstance(value, str):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def read_retrieval_triplets(path, num_negatives=None):
    """Reads JSON lines written by `write_retrieval_triplets` into a `PairDataset`
    of columns `[queries, positives, negative_1, ...]`.

    Every row must have the same number of negatives unless `num_negatives` (an
    int >= 0) is given: then rows are cut to that many and rows with fewer are
    skipped (counted in `skipped`); 0 keeps every row as a (query, positive)
    pair. An empty query or positive is refused, naming the line, as the
    writer refuses it. A row without `negatives` is a (query, positive) pair;
    other keys (ids, scores) are ignored, except one that names negatives some
    other way (`negative`, `hard_negatives`: a key containing "neg" that holds
    a text or a list of texts), which is refused rather than read as a pair.
    """
    if num_negatives is not None and (not is_int(num_negatives) or num_negatives < 0):
        raise ValueError(
            "`num_negatives` should be None or an int >= 0. "
            f"Received: `num_negatives`={num_negatives!r}"
        )
    rows, skipped = [], 0
    for line_number, record in _json_objects(path):
        for key in ("query", "positive"):
            if not isinstance(record.get(key), str):
                raise DataFormatError(path, line_number, f"`{key}` missing or not a string")
            if not record[key].strip():
                # As write_retrieval_triplets refuses it: an empty anchor or
                # positive would train toward the empty string's embedding.
                raise DataFormatError(path, line_number, f"`{key}` is empty")
        misspelt = [key for key, value in record.items()
                    if key != "negatives" and "neg" in key.lower() and _holds_texts(value)]
        if misspelt:
            # A row without `negatives` is a (query, positive) pair: "negative"
            # or "hard_negatives" trained on pairs alone without a word. Keys of
            # numbers or flags (`neg_scores`, `is_negation`) are ignored as
            # other keys are.
            raise DataFormatError(path, line_number, f"unknown key {misspelt[0]!r}; the "
                                  "negatives go in `negatives`, a list of strings")
        negatives = record.get("negatives", [])
        if not isinstance(negatives, list) or not all(isinstance(n, str) for n in negatives):
            raise DataFormatError(path, line_number, "`negatives` should be a list of strings")
        if num_negatives is not None:
            if len(negatives) < num_negatives:
                skipped += 1
                continue
            negatives = negatives[:num_negatives]
        elif rows and len(negatives) != len(rows[0]) - 2:
            raise DataFormatError(
                path,
                line_number,
                f"{len(negatives)} negatives where earlier rows have {len(rows[0]) - 2}; "
                "every row needs as many: re-mine with a wider rank window (`range_max`; "
                "`keras-cosent mine --range-max`) or completing short rows with random "
                "documents (`fill=\"random\"`; `--fill random`), or cut rows to one length "
                "(`num_negatives=`)",
            )
        rows.append([record["query"], record["positive"]] + negatives)
    if not rows:
        reason = "no rows"
        if skipped:
            reason = (f"no rows: all {skipped} have fewer than {num_negatives} negatives "
                      "(re-mine with a wider rank window, or ask for fewer)")
        raise DataFormatError(path, None, reason)
    return PairDataset([list(c) for c in zip(*rows)], None, str(path), skipped=skipped)
