"""Corpus-level retrieval metrics equal to trec_eval (checked against `pytrec_eval`).

Why not keras-rs' ranking metrics: those are batched per-list Keras metrics over
a fixed-size score matrix (one row per list, labels aligned to the scores); they
neither take a run of a query over a whole corpus with qrels naming documents
that may lie outside the retrieved list (Recall and nDCG's ideal DCG need every
judged document), nor follow trec_eval's tie order. These pure functions do.
Where keras-rs fits (every document of a query scored, no ties), its NDCG (with
trec_eval's linear gain), MeanReciprocalRank, RecallAtK, PrecisionAtK and
MeanAveragePrecision give the same values (tests/retrieval/test_keras_rs_agreement.py).

Definitions (trec_eval): documents of a query are ranked by score descending,
ties by document id descending (string order); a document is relevant when its
qrel score is >= 1 (0 and negative grades, which some TREC sets give spam, count
nothing, in nDCG's gains either); with `R` the relevant documents of the query:

- `ndcg@k` (`ndcg_cut_k`): sum of `gain / log2(rank + 1)` over the top k, gain
  = qrel score, divided by the same sum over the ideal (qrels sorted) ranking;
- `precision@k` (`P_k`): relevant in the top k divided by k (always by k);
- `recall@k` (`recall_k`): relevant in the top k divided by `|R|`;
- `map@k` (`map_cut_k`): sum of precision at each relevant rank <= k, by `|R|`;
- `mrr@k`: 1 / rank of the first relevant document within the top k, else 0;
- `accuracy@k` (`success_k`): 1 when a relevant document is in the top k.

Each is averaged over the queries of `qrels` that have at least one relevant
document; a judged query missing from the run counts 0, as with `trec_eval -c`.
trec_eval (and `pytrec_eval`) also averages in, as 0, a query whose judgements
are all non-relevant; such a query is left out here, as `read_beir` leaves it
out of a dataset (reporting it) and sentence-transformers' evaluator ignores it,
so that a set's figures do not depend on how many unanswerable queries it lists.
"""

import itertools
import math
import warnings

import numpy as np

from keras_cosent.retrieval._validation import check_k_values
from keras_cosent.retrieval._validation import check_nested_mapping
from keras_cosent.retrieval._validation import check_qrels
from keras_cosent.retrieval._validation import some_ids
from keras_cosent.utils.arguments import check_bool
from keras_cosent.utils.arguments import check_positive_int
from keras_cosent.utils.arguments import is_int
from keras_cosent.utils.arguments import is_number

METRICS = ("ndcg", "mrr", "recall", "precision", "map", "accuracy")


def run_from_top_k(query_ids, corpus_ids, scores, indices, ignore_identical_ids=False,
                   depth=None):
    """Turns `top_k`'s `(scores, indices)` into a run `{query_id: {doc_id: score}}`.

    With `ignore_identical_ids`, a query's run leaves out the document whose id
    is the query's own, as BEIR's exact search and evaluation do by default
    (`ignore_identical_ids=True` there): in sets such as ArguAna and Quora every
    query is also a corpus document, which would otherwise rank first. Search
    one more document than the run should hold.

    `depth` (a positive int) is how many documents each query keeps, the first
    in rank order; by default every column of `indices`, one fewer with
    `ignore_identical_ids`. `indices` are integer positions in `corpus_ids`.

    Example:

    >>> from keras_cosent.retrieval import run_from_top_k
    >>> run_from_top_k(["a"], ["a", "b", "c"], [[1.0, 0.5, 0.2]], [[0, 1, 2]],
    ...                ignore_identical_ids=True)
    {'a': {'b': 0.5, 'c': 0.2}}
    """
    scores = np.asarray(scores)
    indices = np.asarray(indices)
    query_ids, corpus_ids = list(query_ids), list(corpus_ids)
    if scores.shape != indices.shape or indices.ndim != 2 or len(indices) != len(query_ids):
        raise ValueError(
            "`scores` and `indices` should both have shape (len(query_ids), k) = "
            f"({len(query_ids)}, k). Received shapes {scores.shape} and {indices.shape}."
        )
    if indices.size and not np.issubdtype(indices.dtype, np.integer):
        raise ValueError(
            "`indices` should be integer positions in `corpus_ids`. Received an array "
            f"of dtype {indices.dtype}."
        )
    check_bool("ignore_identical_ids", ignore_identical_ids)
    if depth is not None:
        depth = check_positive_int("depth", depth)
    if indices.size and (indices.min() < 0 or indices.max() >= len(corpus_ids)):
        raise ValueError(
            f"`indices` should index `corpus_ids` (0 to {len(corpus_ids) - 1}). "
            f"Received values from {indices.min()} to {indices.max()}."
        )
    if depth is None:
        columns = indices.shape[1]
        depth = max(columns - int(bool(ignore_identical_ids)), 0)
    run = {}
    for qid, row_s, row_i in zip(query_ids, scores, indices):
        qid = str(qid)
        hits = ((str(corpus_ids[j]), float(s)) for s, j in zip(row_s, row_i))
        if ignore_identical_ids:
            hits = ((d, s) for d, s in hits if d != qid)
        run[qid] = dict(itertools.islice(hits, depth))
    return run


def _ranked(docs):
    # trec_eval: score descending, then document id descending, ids compared as
    # strings (doc 9 before doc 10, as trec_eval reads the ids of a run file).
    return [d for d, _ in sorted(docs.items(), key=lambda item: (item[1], str(item[0])),
                                 reverse=True)]


def query_metrics(ranking, judgements, k):
    """Metrics at cutoff k for one query: `ranking` is a list of doc ids in rank order."""
    relevant = {d: r for d, r in judgements.items() if r >= 1}
    num_rel = len(relevant)
    if num_rel == 0:
        return None
    top = ranking[:k]
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(top))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    hits = 0
    precision_sum = 0.0
    first = None
    for i, d in enumerate(top):
        if d in relevant:
            hits += 1
            precision_sum += hits / (i + 1)
            if first is None:
                first = i + 1
    return {
        "ndcg": dcg / idcg if idcg > 0 else 0.0,
        "mrr": 1.0 / first if first else 0.0,
        "recall": hits / num_rel,
        "precision": hits / k,
        "map": precision_sum / num_rel,
        "accuracy": 1.0 if hits else 0.0,
    }


def retrieval_metrics(run, qrels, k_values=(1, 3, 5, 10, 100), metrics=METRICS, per_query=False):
    """Mean retrieval metrics of a run against qrels, as trec_eval computes them.

    Args:
        run: `{query_id: {doc_id: score}}` (e.g. from `run_from_top_k`), finite
            scores. Query ids are compared with those of `qrels` exactly (`"1"`
            is not `1`): at least one query of `qrels` should be in the run. A
            judged query missing from the run counts 0, as with `trec_eval -c`;
            one whose judgements are all below 1 is left out (module docstring).
        qrels: `{query_id: {doc_id: int relevance}}`, not empty; graded
            relevance allowed.
        k_values: cutoffs, a non-empty sequence of positive ints.
        metrics: names among `ndcg, mrr, recall, precision, map, accuracy`.
        per_query: also return `{query_id: {key: value}}`.

    Returns:
        `{"ndcg@10": float, ...}` (and the per-query dict when `per_query`).

    Example:

    >>> from keras_cosent.retrieval import retrieval_metrics
    >>> out = retrieval_metrics({"q": {"a": 0.9, "b": 0.5}}, {"q": {"b": 1}}, k_values=[1, 2])
    >>> out["mrr@2"], out["recall@1"]
    (0.5, 0.0)
    """
    if isinstance(metrics, str):
        raise ValueError(
            f"`metrics` should be a sequence of names among {METRICS}. Received: "
            f"`metrics`={metrics!r} (write [{metrics!r}] for one)"
        )
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"Unknown metric(s) {unknown}; expected names among {METRICS}.")
    k_values = check_k_values(k_values)
    _check_run_and_qrels(run, qrels)
    totals = {f"{m}@{k}": 0.0 for m in metrics for k in k_values}
    per = {}
    count = 0
    for qid, judgements in qrels.items():
        ranking = _ranked(run.get(qid, {}))
        row = {}
        for k in k_values:
            values = query_metrics(ranking, judgements, k)
            if values is None:
                break
            for m in metrics:
                row[f"{m}@{k}"] = values[m]
        if not row:
            continue
        count += 1
        per[qid] = row
        for key, value in row.items():
            totals[key] += value
    means = {key: (value / count if count else 0.0) for key, value in totals.items()}
    return (means, per) if per_query else means


def _check_run_and_qrels(run, qrels):
    """Refuses what would score silently wrong: no query in common, non-finite scores."""
    check_nested_mapping("run", run, "{doc_id: score}")
    check_qrels(qrels)
    if not qrels:
        raise ValueError("`qrels` should judge at least one query. Received: `qrels`={}")
    if not any(grade >= 1 for judged in qrels.values() for grade in judged.values()):
        raise ValueError(
            "No query of `qrels` has a relevant document (score >= 1), so no query would "
            "be scored."
        )
    if not any(qid in run for qid in qrels):
        raise ValueError(
            "No query id of `qrels` is in `run`, so no query would be scored. `qrels` "
            f"has ids such as {some_ids(qrels)}; `run` has {some_ids(run)}. Ids are "
            "compared exactly: key both by the same type (BEIR's ids are str)."
        )
    run_docs = {doc_id for qid in qrels for doc_id in run.get(qid, {})}
    judged_docs = {doc_id for judged in qrels.values() for doc_id in judged}
    run_types = {type(doc_id) for doc_id in run_docs}
    judged_types = {type(doc_id) for doc_id in judged_docs}
    if run_docs and judged_docs and not run_docs & judged_docs and not run_types & judged_types:
        raise ValueError(
            "No document id of `run` is judged in `qrels`, and their ids are of other types, "
            f"so every query would score 0. `qrels` has document ids such as "
            f"{some_ids(sorted(judged_docs, key=repr))}; `run` has "
            f"{some_ids(sorted(run_docs, key=repr))}. Ids are compared "
            "exactly: key both by the same type (BEIR's ids are str)."
        )
    for qid, docs in run.items():
        for doc_id, score in docs.items():
            if not is_number(score) or not math.isfinite(score):
                raise ValueError(
                    f"`run` should hold finite scores. Received: {score!r} for query "
                    f"{qid!r}, document {doc_id!r}"
                )


def v_measure(embeddings, labels, num_clusters=None, seed=0):
    """V-measure of k-means clusters of `embeddings` against `labels` (MTEB's clustering score).

    Uses scikit-learn's `KMeans` (n_init=10, seeded) and `v_measure_score`.

    Args:
        embeddings: `(n, dim)` array, one row per text.
        labels: one label per row; at least 2 distinct ones (with a single
            class, a single cluster scores 1.0 whatever the embeddings).
        num_clusters: a positive int, at most `n`; defaults to the number of
            distinct labels.
        seed: seeds `KMeans`.

    Returns:
        The V-measure in [0, 1]; NaN, with a warning, when an embedding is not
        finite (a diverged encoder), as the other scores of such a model are.
    """
    embeddings = np.asarray(embeddings, dtype=np.float32)
    labels = np.asarray(labels)
    if embeddings.ndim != 2 or embeddings.shape[0] != labels.shape[0]:
        raise ValueError(
            "`embeddings` should be (n, dim) with one label each. Received shapes "
            f"{embeddings.shape} and {labels.shape}."
        )
    bad_rows = np.flatnonzero(~np.isfinite(embeddings).all(axis=1))
    if bad_rows.size:
        # A diverged encoder: NaN, as the STS and retrieval scores are (k-means
        # refuses NaN with an error that names neither the model nor the rows).
        warnings.warn(
            f"`v_measure`: {bad_rows.size} of {len(embeddings)} embeddings are not finite "
            f"(row {bad_rows[0]} first); the score is NaN.", stacklevel=2)
        return float("nan")
    if len(labels) < 2:
        raise ValueError(f"`v_measure` needs at least 2 labelled texts. Received {len(labels)}.")
    distinct = np.unique(labels)
    if len(distinct) < 2:
        raise ValueError(
            "`labels` should hold at least 2 distinct labels: clustering needs at least 2 "
            f"classes. Received: every label is {distinct[0].item()!r}"
        )
    if num_clusters is None:
        num_clusters = len(distinct)
    elif not is_int(num_clusters) or not 1 <= num_clusters <= len(labels):
        raise ValueError(
            f"`num_clusters` should be a positive int, at most the {len(labels)} texts. "
            f"Received: `num_clusters`={num_clusters!r}"
        )
    try:
        from sklearn.cluster import KMeans
        from sklearn.metrics import v_measure_score
    except ImportError as error:
        raise ImportError(
            f"`v_measure` needs scikit-learn ({error}): "
            'pip install "keras-cosent[clustering]"'
        ) from error

    kmeans = KMeans(n_clusters=int(num_clusters), n_init=10, random_state=seed)
    clusters = kmeans.fit_predict(embeddings)
    return float(v_measure_score(labels, clusters))
