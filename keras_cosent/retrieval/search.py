"""Exact top-k search by inner product (cosine on normalised embeddings), in chunks.

The search runs in NumPy on the host: `encoder.encode` already returns NumPy
arrays, the work is one matrix product per chunk plus a partial sort, and keeping
it off the accelerator means a 1M-document corpus never has to fit in device
memory. Memory is bounded: at most `query_chunk_size x (chunk_size + k)` scores
(float32) and as many indices live at once; a full queries x corpus matrix is
never allocated. With `use_faiss=True` (or `None` when `faiss` imports) an exact
`faiss.IndexFlatIP` is used instead.
"""

import numpy as np


def _normalize(x):
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def _merge(best_scores, best_index, scores, index, k):
    """Keeps the k best per row: score descending, then corpus index ascending."""
    all_scores = np.concatenate([best_scores, scores], axis=1)
    all_index = np.concatenate([best_index, index], axis=1)
    # lexsort: last key is primary. Primary -score, secondary index.
    order = np.lexsort((all_index, -all_scores), axis=1)[:, :k]
    return (
        np.take_along_axis(all_scores, order, axis=1),
        np.take_along_axis(all_index, order, axis=1),
    )


def top_k(
    query_embeddings,
    corpus_embeddings,
    k,
    chunk_size=16384,
    query_chunk_size=256,
    normalize=True,
    use_faiss=False,
):
    """Exact top-k corpus rows for each query, computed over chunks.

    Args:
        query_embeddings: array `(num_queries, dim)`.
        corpus_embeddings: array `(num_docs, dim)`.
        k: how many results per query (clipped to `num_docs`).
        chunk_size: corpus rows scored at once.
        query_chunk_size: query rows scored at once. Peak extra memory is about
            `query_chunk_size * (chunk_size + k) * 12` bytes.
        normalize: L2-normalise both sides first (cosine similarity).
        use_faiss: `True` to use `faiss.IndexFlatIP` (exact), `None` to use it
            when installed, `False` (default) for the NumPy path.

    Returns:
        `(scores, indices)`, float32 and int64 arrays of shape `(num_queries, k)`,
        ordered by score descending; equal scores are ordered by corpus index
        ascending (NumPy path), so results are deterministic.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.retrieval import top_k
    >>> scores, indices = top_k(np.eye(2), np.array([[0.0, 1.0], [1.0, 0.0]]), k=1)
    >>> indices.tolist()
    [[1], [0]]
    """
    queries = np.asarray(query_embeddings, dtype=np.float32)
    corpus = np.asarray(corpus_embeddings, dtype=np.float32)
    if queries.ndim != 2 or corpus.ndim != 2 or queries.shape[1] != corpus.shape[1]:
        raise ValueError(
            "`query_embeddings` and `corpus_embeddings` should be 2-D with the same "
            f"dimension. Received shapes {queries.shape} and {corpus.shape}."
        )
    if int(k) < 1:
        raise ValueError(f"`k` should be a positive integer. Received: k={k}")
    if int(chunk_size) < 1 or int(query_chunk_size) < 1:
        raise ValueError(
            "`chunk_size` and `query_chunk_size` should be positive. Received: "
            f"chunk_size={chunk_size}, query_chunk_size={query_chunk_size}"
        )
    k = min(int(k), corpus.shape[0])
    if normalize:
        queries, corpus = _normalize(queries), _normalize(corpus)
    if use_faiss is None:
        try:
            import faiss  # noqa: F401

            use_faiss = True
        except ImportError:
            use_faiss = False
    if use_faiss:
        import faiss

        index = faiss.IndexFlatIP(corpus.shape[1])
        index.add(np.ascontiguousarray(corpus))
        scores, indices = index.search(np.ascontiguousarray(queries), k)
        return scores.astype(np.float32), indices.astype(np.int64)
    num_queries = queries.shape[0]
    out_scores = np.empty((num_queries, k), dtype=np.float32)
    out_index = np.empty((num_queries, k), dtype=np.int64)
    for q0 in range(0, num_queries, query_chunk_size):
        q = queries[q0 : q0 + query_chunk_size]
        best_scores = np.empty((q.shape[0], 0), dtype=np.float32)
        best_index = np.empty((q.shape[0], 0), dtype=np.int64)
        for c0 in range(0, corpus.shape[0], chunk_size):
            scores = q @ corpus[c0 : c0 + chunk_size].T
            index = np.broadcast_to(
                np.arange(c0, c0 + scores.shape[1], dtype=np.int64), scores.shape
            )
            best_scores, best_index = _merge(best_scores, best_index, scores, index, k)
            del scores, index
        out_scores[q0 : q0 + q.shape[0]] = best_scores
        out_index[q0 : q0 + q.shape[0]] = best_index
    return out_scores, out_index
