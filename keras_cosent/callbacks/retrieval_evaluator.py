"""The callback that scores a sentence encoder on a retrieval split after every epoch."""

import collections.abc
import warnings

import keras
import numpy as np

from keras_cosent.retrieval._validation import check_distinct_as_strings
from keras_cosent.retrieval._validation import check_encoder
from keras_cosent.retrieval._validation import check_k_values
from keras_cosent.retrieval._validation import check_qrels
from keras_cosent.retrieval.metrics import retrieval_metrics
from keras_cosent.retrieval.metrics import run_from_top_k
from keras_cosent.retrieval.search import top_k
from keras_cosent.utils.arguments import check_bool
from keras_cosent.utils.arguments import check_positive_int


class RetrievalEvaluator(keras.callbacks.Callback):
    """Scores the encoder on queries against a corpus after every epoch.

    At each epoch end it encodes queries and corpus with
    `encoder.encode(texts, batch_size=batch_size)`, finds each query's top
    `max(k_values)` documents by cosine with the exact chunked search
    (`keras_cosent.retrieval.top_k`, memory bounded by `chunk_size`) and writes
    `<name>_ndcg@k`, `<name>_mrr@k`, `<name>_recall@k`, `<name>_precision@k`,
    `<name>_accuracy@k` for each `k` in `k_values` and `<name>_map@100` (all
    trec_eval-equal, `keras_cosent.retrieval.retrieval_metrics`) into `logs`.
    Keras' `ModelCheckpoint` and `EarlyStopping` read them as monitors with
    `mode="max"` (their `"auto"` cannot tell from these names that higher is
    better), and `CSVLogger` writes them, when listed after the evaluator: Keras
    runs callbacks in list order, and one listed before finds no such value (it
    warns, then saves every epoch or never stops). Under data parallelism
    (`keras_cosent.distributed.data_parallel`) it scores the whole split with the
    current weights, in every process (each PyTorch rank), and logs the values
    one device gives.

    Args:
        queries: `{query_id: text}`, a mapping.
        corpus: `{doc_id: text}`, a mapping.
        qrels: `{query_id: {doc_id: int relevance}}`. Ids of all three are
            compared as strings (`1` and `"1"` are the same id); every query
            it names should be in `queries`, and those it scores (with a
            document of relevance >= 1) should have a text that is not blank.
        name: prefix of the log keys.
        encoder: object with `encode(texts, batch_size=...)`; defaults to the
            `encoder` attribute of the model being trained.
        k_values: cutoffs, positive ints; 10 and 100 are always added
            (`map@100`, and the `@10` figures `verbose` prints).
        batch_size: encoding batch size, a positive int.
        chunk_size: corpus rows scored at once, a positive int.
        use_faiss: passed to `top_k` (True, False or None).
        ignore_identical_ids: leave out of each query's ranking the document
            whose id is the query's own, as BEIR's evaluation does by default
            (sets such as ArguAna and Quora hold every query in the corpus too;
            `keras_cosent.retrieval.run_from_top_k`).
        verbose: 0 or 1.
        unknown_documents: what a judgement of a document that `corpus` lacks
            does: `"error"` (default) refuses it, naming a few, since a
            mistyped id would silently score as a miss; `"keep"` scores it as
            BEIR's evaluation does, relevant and never retrieved (BEIR's
            ArguAna judges a document its corpus lacks). `from_dataset` picks
            `"keep"` for a dataset read with `read_beir(...,
            unknown_ids="report")`, which has already reported them.

    Call arguments: used by `model.fit(callbacks=[...])`.

    Returns: nothing; each epoch's metrics dict (as `evaluate()` returns it, with its
    `epoch`) is kept in `history`, reset when a `fit` begins.

    Example:

    >>> from keras_cosent.callbacks import RetrievalEvaluator
    >>> evaluator = RetrievalEvaluator({"q": "a cat"}, {"d": "a cat", "e": "a car"},
    ...                                {"q": {"d": 1}})
    >>> evaluator.name
    'ir_dev'

    Reference: Thakur et al., "BEIR: A Heterogeneous Benchmark for Zero-shot
    Evaluation of Information Retrieval Models", 2021.
    """

    def __init__(
        self,
        queries,
        corpus,
        qrels,
        name="ir_dev",
        encoder=None,
        k_values=(1, 3, 5, 10),
        batch_size=32,
        chunk_size=16384,
        use_faiss=False,
        ignore_identical_ids=False,
        verbose=0,
        unknown_documents="error",
    ):
        super().__init__()
        # Every argument is checked here, not at the end of the first epoch.
        if not isinstance(name, str) or not name:
            raise ValueError(f"`name` should be a non-empty string. Received: `name`={name!r}")
        check_encoder(encoder)
        k_values = check_k_values(k_values)
        batch_size = check_positive_int("batch_size", batch_size)
        chunk_size = check_positive_int("chunk_size", chunk_size)
        use_faiss = check_bool("use_faiss", use_faiss, allow_none=True)
        ignore_identical_ids = check_bool("ignore_identical_ids", ignore_identical_ids)
        if verbose not in (0, 1):
            raise ValueError(f"`verbose` should be 0 or 1. Received: `verbose`={verbose!r}")
        if unknown_documents not in ("error", "keep"):
            raise ValueError(
                "`unknown_documents` should be 'error' or 'keep'. "
                f"Received: `unknown_documents`={unknown_documents!r}"
            )
        queries = _texts_by_id(queries, "queries")
        corpus = _texts_by_id(corpus, "corpus")
        if not corpus:
            raise ValueError("`corpus` should hold at least one document. Received: 0 documents.")
        qrels = _judgements(qrels)
        missing = [q for q in qrels if q not in queries]
        if missing:
            raise ValueError(
                f"`qrels` name {len(missing)} queries that `queries` lacks (ids are compared "
                f"as strings): {missing[:5]}"
            )
        unknown = [(q, d) for q, judged in qrels.items() for d in judged if d not in corpus]
        if unknown and unknown_documents == "error":
            raise ValueError(
                f"`qrels` judge {len(unknown)} document(s) that `corpus` lacks (first "
                f"(query, document) pairs: {unknown[:5]}); they would score as relevant "
                "documents never retrieved. Fix the ids, or pass unknown_documents='keep' to "
                "score them so, as BEIR's evaluation does."
            )
        self.query_ids = [q for q in qrels if any(s >= 1 for s in qrels[q].values())]
        if not self.query_ids:
            raise ValueError("No query of `qrels` has a relevant document (score >= 1).")
        blank = blank_queries(queries, self.query_ids)
        if blank:
            # Scored, it ranked the corpus by the embedding of no text at all.
            raise ValueError(
                f"{len(blank)} scored quer{'y has' if len(blank) == 1 else 'ies have'} a blank "
                f"text in `queries` (first: {blank[:5]}): nothing to search with. Fix the "
                "text, or leave the query out of `qrels`."
            )
        self.query_texts = [queries[q] for q in self.query_ids]
        # In trec_eval's tie order (document id descending): the search keeps the
        # first of tied documents by position, so a tie across the search depth
        # keeps those the metrics rank first, as trec_eval on every document's
        # score would (with the corpus' own order, 150 copies of a text left the
        # relevant one out and its ndcg@10 0 where trec_eval gives 1).
        self.corpus_ids = sorted(corpus, reverse=True)
        self.corpus_texts = [corpus[d] for d in self.corpus_ids]
        self.qrels = qrels
        self.unknown_documents = unknown_documents
        self.unknown_judgements = unknown
        self.name = name
        self.encoder = encoder
        self.k_values = sorted(set(k_values) | {10, 100})
        self.batch_size = batch_size
        self.chunk_size = chunk_size
        self.use_faiss = use_faiss
        self.ignore_identical_ids = ignore_identical_ids
        self.verbose = verbose
        self.history = []

    @classmethod
    def from_dataset(cls, dataset, name="ir_dev", **kwargs):
        """Builds the evaluator from a `keras_cosent.data.RetrievalDataset`.

        Judgements of documents the corpus lacks are kept (`unknown_documents=
        "keep"`) when the dataset was read with `unknown_ids="report"`, the
        reader's mode that keeps and reports them, and refused otherwise;
        `unknown_documents=` overrides it.
        """
        if getattr(dataset, "unknown_ids", "error") == "report":
            kwargs.setdefault("unknown_documents", "keep")
        return cls(dataset.queries, dataset.corpus, dataset.qrels, name=name, **kwargs)

    def _resolve_encoder(self):
        model = self.model
        if self.encoder is not None:
            return self.encoder
        encoder = getattr(model, "encoder", None) if model is not None else None
        if encoder is None or not callable(getattr(encoder, "encode", None)):
            raise ValueError(
                "RetrievalEvaluator has no encoder: pass `encoder=`, or use it as a callback "
                "of a model with an `encoder` attribute that has an `encode` method."
            )
        return encoder

    def evaluate(self, per_query=False):
        """Returns `{"ndcg@10": float, ...}` for the current weights.

        With `per_query=True`, also `{query_id: {"ndcg@10": float, ...}}`, the
        figures of each query that the means average (for paired comparisons
        of two models on the same queries).
        """
        encoder = self._resolve_encoder()
        q, problem = _encoded(encoder, self.query_texts, self.query_ids, self.batch_size,
                              "queries")
        if problem is None:
            c, problem = _encoded(encoder, self.corpus_texts, self.corpus_ids, self.batch_size,
                                  "corpus")
        if problem is not None:
            # A diverged model: NaN has no rank, so every figure is NaN (as the
            # Spearman metrics report it), not a ranking of arbitrary order. The
            # search is skipped: an empty run gives the figures' names.
            warnings.warn(f"{self.name}: {problem}; its retrieval figures are NaN",
                          stacklevel=2)
            empty = {qid: {} for qid in self.query_ids}
            result = retrieval_metrics(empty, self.qrels, k_values=self.k_values,
                                       per_query=per_query)
            if per_query:
                means, per = result
                return _all_nan(means), {qid: _all_nan(row) for qid, row in per.items()}
            return _all_nan(result)
        # One more when the query's own document is dropped from its ranking.
        depth = max(self.k_values) + self.ignore_identical_ids
        scores, indices = top_k(
            q, c, depth, chunk_size=self.chunk_size, use_faiss=self.use_faiss
        )
        run = run_from_top_k(self.query_ids, self.corpus_ids, scores, indices,
                             ignore_identical_ids=self.ignore_identical_ids,
                             depth=max(self.k_values))
        return retrieval_metrics(run, self.qrels, k_values=self.k_values, per_query=per_query)

    def on_train_begin(self, logs=None):
        # One entry per epoch of the current `fit`, as `SpearmanEvaluator` keeps.
        self.history = []

    def on_epoch_end(self, epoch, logs=None):
        values = self.evaluate()
        keys = [k for k in values if not k.startswith("map@") or k == "map@100"]
        if logs is not None:
            for key in keys:
                logs[f"{self.name}_{key}"] = values[key]
        self.history.append({"epoch": epoch, **values})
        if self.verbose:
            print(
                f"Epoch {epoch + 1}: {self.name}_ndcg@10={values['ndcg@10']:.4f} "
                f"{self.name}_mrr@10={values['mrr@10']:.4f} "
                f"{self.name}_recall@10={values['recall@10']:.4f} "
                f"{self.name}_map@100={values['map@100']:.4f}"
            )


def blank_queries(queries, query_ids):
    """The ids among `query_ids` whose text in `queries` is empty or whitespace."""
    return [q for q in query_ids if not queries[q].strip()]


def _texts_by_id(items, name):
    """`{str(id): text}` of the mapping `items`, or raises naming `name`."""
    if not isinstance(items, collections.abc.Mapping):
        raise TypeError(
            f"`{name}` should be a mapping {{id: text}} (e.g. a dict). "
            f"Received: `{name}` of type {type(items).__name__}"
        )
    for key, text in items.items():
        if not isinstance(text, str):
            raise ValueError(
                f"`{name}` should map ids to texts (str). Received: `{name}`[{key!r}]={text!r:.80}"
            )
    check_distinct_as_strings(items, name)
    return {str(key): text for key, text in items.items()}


def _judgements(qrels):
    """`{str(query_id): {str(doc_id): int}}` of `qrels`, or raises naming it."""
    check_qrels(qrels)
    return {str(qid): {str(doc_id): int(grade) for doc_id, grade in judged.items()}
            for qid, judged in qrels.items()}


def _encoded(encoder, texts, ids, batch_size, what):
    """`(embeddings, problem)`: `encoder.encode(texts)` as an array, refused unless it
    has one row per text; `problem` says which rows are not finite (else None)."""
    embeddings = np.asarray(encoder.encode(texts, batch_size=batch_size))
    if embeddings.ndim != 2 or embeddings.shape[0] != len(texts):
        raise ValueError(
            f"`encoder.encode` should return an array of shape ({len(texts)}, dim) for the "
            f"{len(texts)} texts of `{what}`. Received shape {embeddings.shape}."
        )
    bad = np.flatnonzero(~np.isfinite(embeddings).all(axis=1))
    if not bad.size:
        return embeddings, None
    return embeddings, (
        f"`encoder.encode` returned non-finite values (NaN or inf) for {bad.size} of the "
        f"{len(texts)} texts of `{what}` (first: id {ids[bad[0]]!r}); the weights may have "
        "diverged"
    )


def _all_nan(values):
    return {key: float("nan") for key in values}
