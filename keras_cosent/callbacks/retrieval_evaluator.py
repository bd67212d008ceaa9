"""The callback that scores a sentence encoder on a retrieval split after every epoch."""

import keras
import numpy as np

from keras_cosent.retrieval.metrics import retrieval_metrics
from keras_cosent.retrieval.metrics import run_from_top_k
from keras_cosent.retrieval.search import top_k


class RetrievalEvaluator(keras.callbacks.Callback):
    """Scores the encoder on queries against a corpus after every epoch.

    At each epoch end it encodes queries and corpus with
    `encoder.encode(texts, batch_size=batch_size)`, finds each query's top
    `max(k_values)` documents by cosine with the exact chunked search
    (`keras_cosent.retrieval.top_k`, memory bounded by `chunk_size`) and writes
    `<name>_ndcg@k`, `<name>_mrr@k`, `<name>_recall@k`, `<name>_precision@k`,
    `<name>_accuracy@k` for each `k` in `k_values` and `<name>_map@100` (all
    trec_eval-equal, `keras_cosent.retrieval.retrieval_metrics`) into `logs`.
    Under data parallelism (`keras_cosent.distributed.data_parallel`) it
    scores the whole split with the current weights, in every process (each
    PyTorch rank), and logs the values one device gives.

    Args:
        queries: `{query_id: text}`.
        corpus: `{doc_id: text}`.
        qrels: `{query_id: {doc_id: int relevance}}`.
        name: prefix of the log keys.
        encoder: object with `encode(texts, batch_size=...)`; defaults to the
            `encoder` attribute of the model being trained.
        k_values: cutoffs; 100 is always added for `map@100`.
        batch_size: encoding batch size.
        chunk_size: corpus rows scored at once.
        use_faiss: passed to `top_k`.
        ignore_identical_ids: leave out of each query's ranking the document
            whose id is the query's own, as BEIR's evaluation does by default
            (sets such as ArguAna and Quora hold every query in the corpus too;
            `keras_cosent.retrieval.run_from_top_k`).
        verbose: 0 or 1.

    Call arguments: used by `model.fit(callbacks=[...])`.

    Returns: nothing; `evaluate()` returns the metrics dict, kept in `history`.

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
    ):
        super().__init__()
        if not isinstance(name, str) or not name:
            raise ValueError(f"`name` should be a non-empty string. Received: `name`={name!r}")
        if encoder is not None and not callable(getattr(encoder, "encode", None)):
            raise ValueError(
                "`encoder` should have an `encode(texts, batch_size=...)` method. "
                f"Received: `encoder` of type {type(encoder).__name__}"
            )
        qrels = {str(q): {str(d): int(s) for d, s in j.items()} for q, j in qrels.items()}
        missing = [q for q in qrels if q not in queries]
        if missing:
            raise ValueError(f"qrels name queries not in `queries`: {missing[:5]}")
        self.query_ids = [q for q in qrels if any(s >= 1 for s in qrels[q].values())]
        if not self.query_ids:
            raise ValueError("No query of `qrels` has a relevant document (score >= 1).")
        self.query_texts = [queries[q] for q in self.query_ids]
        self.corpus_ids = [str(d) for d in corpus]
        self.corpus_texts = list(corpus.values())
        self.qrels = qrels
        self.name = name
        self.encoder = encoder
        self.k_values = sorted(set(int(k) for k in k_values) | {10, 100})
        self.batch_size = batch_size
        self.chunk_size = chunk_size
        self.use_faiss = use_faiss
        self.ignore_identical_ids = bool(ignore_identical_ids)
        self.verbose = verbose
        self.history = []

    @classmethod
    def from_dataset(cls, dataset, name="ir_dev", **kwargs):
        """Builds the evaluator from a `keras_cosent.data.RetrievalDataset`."""
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
        q = np.asarray(encoder.encode(self.query_texts, batch_size=self.batch_size))
        c = np.asarray(encoder.encode(self.corpus_texts, batch_size=self.batch_size))
        # One more when the query's own document is dropped from its ranking.
        depth = max(self.k_values) + self.ignore_identical_ids
        scores, indices = top_k(
            q, c, depth, chunk_size=self.chunk_size, use_faiss=self.use_faiss
        )
        run = run_from_top_k(self.query_ids, self.corpus_ids, scores, indices,
                             ignore_identical_ids=self.ignore_identical_ids,
                             depth=max(self.k_values))
        return retrieval_metrics(run, self.qrels, k_values=self.k_values, per_query=per_query)

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
