"""Evaluation shared by `train` and `evaluate`: STS correlations and retrieval metrics, x 100.

The numbers come from `keras_cosent.callbacks.SpearmanEvaluator.evaluate` and
`RetrievalEvaluator.evaluate`, the same code that scores the dev sets after every
training epoch, so the per-epoch metrics, the final table and `keras-cosent
evaluate` can never disagree.
"""

from recipes.progress import announced
from recipes.progress import prefixed


class Truncating:
    """An encoder whose `encode` returns the first `dim` coordinates of `encoder`'s
    embeddings, re-normalised, as `SentenceEncoder.encode(truncate_dim=dim)` does
    (`keras_cosent.utils.truncate_embeddings`).

    `cache` (a dict) holds each call's full embeddings, keyed by its texts: the
    encoders of several sizes that share one encode the texts once (`keras-cosent
    evaluate --truncate-dim 384,128,64`).
    """

    def __init__(self, encoder, dim, cache):
        self._encoder, self.dim, self._cache = encoder, dim, cache

    def encode(self, texts, batch_size=32, **options):
        import keras

        from keras_cosent.utils import truncate_embeddings

        key = tuple(texts)
        if key not in self._cache:
            self._cache[key] = self._encoder.encode(texts, batch_size=batch_size, **options)
        return keras.ops.convert_to_numpy(truncate_embeddings(self._cache[key], self.dim))


def evaluate_sts(encoder, dataset, batch_size=64, note=None):
    """Corpus-level Spearman and Pearson (x 100) of pair cosines against the labels.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder`.
        dataset: a 2-column `keras_cosent.data.PairDataset` with labels.
        batch_size: sentences per forward pass.
        note: a callable taking a message: if given, each encoding is announced
            through it and shows a progress bar on stderr (`keras-cosent evaluate`).

    Returns:
        `{"pairs": int, "spearman": float, "pearson": float}`.
    """
    from keras_cosent.callbacks import SpearmanEvaluator

    evaluator = SpearmanEvaluator.from_dataset(
        dataset, encoder=announced(encoder, note, "distinct sentences"), batch_size=batch_size,
        verbose=0
    )
    scores = evaluator.evaluate()
    return {
        "pairs": len(dataset),
        "spearman": 100.0 * scores["spearman"],
        "pearson": 100.0 * scores["pearson"],
    }


def epoch_end_sts_evaluator(encoder, dataset, name, note):
    """The `SpearmanEvaluator` callback that `train` scores `dataset` (--dev) with
    after every epoch, logging `<name>_spearman`; `note` announces its encodings."""
    from keras_cosent.callbacks import SpearmanEvaluator

    return SpearmanEvaluator.from_dataset(
        dataset, name=name, verbose=0,
        encoder=announced(encoder, prefixed(note, f"{name}, end of epoch"),
                          "distinct sentences"))


RETRIEVAL_CUTOFFS = (1, 3, 5, 10, 100)


def note_identical_ids(env, dataset, option, ignored, mining=False):
    """Notes a split whose queries share ids with its documents.

    BEIR's evaluation leaves a query's own document out of its ranking
    (`ignore_identical_ids`); without `--ignore-identical-ids` it is ranked, as
    sentence-transformers' evaluator and trec_eval on the plain run do. The note
    says how many of those documents hold the query's own text (ArguAna's and
    Quora's all do), since ids shared by chance (numbered ids) are no reason to
    leave a document out; with the option on, it says how many of the documents
    left out are judged relevant to their query.

    For a split hard negatives are mined from (`mining`), the note says such a
    document may be mined as its query's negative; with the option on there is
    nothing to say: the document is never a negative, and one judged relevant is
    still a positive.
    """
    shared = dataset.shared_ids
    if not shared or (mining and ignored):
        return
    same_text = sum(dataset.queries[q] == dataset.corpus[q] for q in shared)
    if not ignored:
        consequence = ("mining may take such a document as its query's negative: "
                       "--ignore-identical-ids keeps it out" if mining else
                       "BEIR leaves such documents out of the ranking: --ignore-identical-ids "
                       "does the same")
        env.note(f"{len(shared)} of {len(dataset.queries)} queries of {option} share their id "
                 f"with a document, {same_text} of those documents with the query's text too "
                 f"(in BEIR's ArguAna and Quora that document is the query itself); {consequence}")
        return
    relevant = sum(dataset.qrels.get(q, {}).get(q, 0) >= 1 for q in shared)
    if relevant:
        env.note(f"--ignore-identical-ids: for {relevant} queries of {option} the document left "
                 "out of the ranking (the one with the query's id) is judged relevant to it, "
                 "so it counts as never retrieved")


def evaluate_retrieval(encoder, dataset, batch_size=64, top_k=100, per_query=False,
                       use_faiss=False, ignore_identical_ids=False, note=None):
    """Retrieval metrics (x 100) of the encoder's cosine ranking on a BEIR split.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder`.
        dataset: a `keras_cosent.data.RetrievalDataset`.
        batch_size: sentences per forward pass.
        top_k: documents retrieved per query (>= 100, so that MAP@100 is whole).
        per_query: also return each query's figures under `"per_query"`.
        use_faiss: search with faiss' exact index instead of NumPy (`top_k`).
        ignore_identical_ids: leave each query's own document (same id) out of
            its ranking, as BEIR does.
        note: as in `evaluate_sts`.

    Returns:
        `{"queries": int, "documents": int, "ndcg@10": float, ...}`: every
        metric of `keras_cosent.retrieval.METRICS` at 1, 3, 5, 10, 100 and `top_k`;
        with `per_query`, also `"per_query": {query_id: {"ndcg@10": float, ...}}`
        (x 100, the four figures the table reports).
    """
    from keras_cosent.callbacks import RetrievalEvaluator
    from recipes.reporting import RETRIEVAL_COLUMNS

    evaluator = RetrievalEvaluator.from_dataset(
        dataset, encoder=announced(encoder, note, "queries", "documents"),
        batch_size=batch_size,
        k_values=RETRIEVAL_CUTOFFS + (top_k,), verbose=0, use_faiss=use_faiss,
        ignore_identical_ids=ignore_identical_ids,
    )
    scores, per = evaluator.evaluate(per_query=True)
    result = {
        "queries": len(evaluator.query_ids),
        "documents": len(evaluator.corpus_ids),
        **{key: 100.0 * value for key, value in scores.items()},
    }
    if per_query:
        result["per_query"] = {
            qid: {key: 100.0 * row[key] for key in RETRIEVAL_COLUMNS} for qid, row in per.items()
        }
    return result


def evaluate_clustering(encoder, texts, labels, batch_size=64, seed=0, note=None):
    """V-measure (x 100, MTEB's clustering score) of k-means clusters against the labels.

    k is the number of distinct labels; `keras_cosent.retrieval.v_measure`
    runs scikit-learn's `KMeans` (n_init=10, seeded).

    Returns:
        `{"texts": int, "clusters": int, "v_measure": float}`.
    """
    from keras_cosent.retrieval import v_measure

    encoder = announced(encoder, note, "texts")
    embeddings = encoder.encode(list(texts), batch_size=batch_size)
    return {
        "texts": len(texts),
        "clusters": len(set(labels)),
        "v_measure": 100.0 * v_measure(embeddings, list(labels), seed=seed),
    }
