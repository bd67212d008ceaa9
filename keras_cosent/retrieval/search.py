"""Exact top-k search by inner product (cosine on normalised embeddings), in chunks.

The search runs in NumPy on the host: `encoder.encode` already returns NumPy
arrays, the work is one matrix product per chunk plus a partial sort, and keeping
it off the accelerator means a 1M-document corpus never has to fit in device
memory. Memory is bounded: one `query_chunk_size x chunk_size` block of scores
(float32) lives at once, a full queries x corpus matrix is never allocated, and
the corpus is cast and normalised one chunk at a time, never copied whole.
Nothing is sorted whole: in each block, the columns that beat a query's running
k-th best are found with one comparison and only those are
sorted with the best so far; a query chunk's first block (or a block where too
many columns pass) is cut to its k best by partition (linear time) first. A
row whose k-th score ties with a column left out is sorted in full, so that
ties keep the lowest corpus index. With `use_faiss=True` (or `None` when
`faiss` imports) an exact `faiss.IndexFlatIP` is used instead.
"""

import numpy as np

from keras_cosent.utils.arguments import check_bool
from keras_cosent.utils.arguments import check_positive_int


def _normalize(x):
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def _normalized_chunks(corpus, chunk_size, normalize=True):
    """Yields `(offset, rows)`: `corpus` cast to float32 (and L2-normalised) one
    chunk at a time, the same rows as doing it whole without copying it whole."""
    for c0 in range(0, corpus.shape[0], chunk_size):
        block = np.asarray(corpus[c0 : c0 + chunk_size], dtype=np.float32)
        yield c0, (_normalize(block) if normalize else block)


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


def _chunk_candidates(scores, offset, k):
    """The k best columns of each row of one scored chunk, as `(scores, indices)`.

    The same columns a full sort by (score descending, index ascending) would
    keep, found in linear time: `argpartition` picks k columns, and a row
    whose k-th score is tied with a column left out (where `argpartition`'s
    choice among equal scores is arbitrary) is sorted in full instead. Order
    within the k is left to `_merge`.
    """
    n = scores.shape[1]
    if n <= k:
        index = np.broadcast_to(np.arange(offset, offset + n, dtype=np.int64), scores.shape)
        return scores, index
    picked = np.argpartition(scores, n - k, axis=1)[:, n - k :]
    picked_scores = np.take_along_axis(scores, picked, axis=1)
    kth = picked_scores.min(axis=1, keepdims=True)
    # More columns at or above the k-th score than k: a tie at the boundary.
    # NaN scores (an encoder's NaN output; `argpartition` ranks them highest,
    # the full sort lowest) also take the exact path.
    unsure = (np.count_nonzero(scores >= kth, axis=1) > k) | np.isnan(kth[:, 0])
    for row in np.flatnonzero(unsure):
        order = np.lexsort((np.arange(n), -scores[row]))[:k]
        picked[row] = order
        picked_scores[row] = scores[row, order]
    return picked_scores, picked.astype(np.int64) + offset


def _merge_above(best_scores, best_index, scores, offset, k, limit):
    """`_merge` of a chunk that comes after `best` (k columns, sorted), or None.

    Only a column scoring above a row's current k-th best can enter its top
    k (columns here come after every index in `best`, so a tie goes to
    `best`). Those few are found with one comparison and sorted with `best`,
    rows kept together; the chunk is not partitioned. None when more than
    `limit` columns pass (a chunk better than all before it: partition it).
    """
    rows_count = scores.shape[0]
    kth = best_scores[:, -1:]
    mask = scores > kth
    nan_rows = np.isnan(kth[:, 0])
    if nan_rows.any():  # fewer than k real scores so far: every column may enter
        mask[nan_rows] = True
    # Counted before np.nonzero, whose two int64 arrays would outgrow the
    # documented memory bound when most of a chunk passes.
    if np.count_nonzero(mask) > limit:
        return None
    rows, cols = np.nonzero(mask)
    all_rows = np.concatenate([np.repeat(np.arange(rows_count), k), rows])
    all_scores = np.concatenate([best_scores.ravel(), scores[rows, cols]])
    all_index = np.concatenate([best_index.ravel(), cols.astype(np.int64) + offset])
    order = np.lexsort((all_index, -all_scores, all_rows))
    starts = np.concatenate([[0], np.cumsum(np.bincount(all_rows, minlength=rows_count))[:-1]])
    keep = order[(starts[:, None] + np.arange(k)).ravel()]
    return all_scores[keep].reshape(rows_count, k), all_index[keep].reshape(rows_count, k)


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
        k: how many results per query, a positive int (clipped to `num_docs`).
        chunk_size: corpus rows scored at once, a positive int.
        query_chunk_size: query rows scored at once, a positive int. Peak extra memory is about
            `query_chunk_size * chunk_size * 13` bytes (the scores, the
            partition's int64 order and a mask): 55 MB at the defaults, plus
            one normalised float32 chunk of the corpus; the corpus is never
            copied whole.
        normalize: bool, L2-normalise both sides first (cosine similarity).
        use_faiss: `True` to use `faiss.IndexFlatIP` (exact), `None` to use it
            when installed, `False` (default) for the NumPy path; nothing else.

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
    corpus = np.asarray(corpus_embeddings)  # cast and normalised by chunk, below
    if queries.ndim != 2 or corpus.ndim != 2 or queries.shape[1] != corpus.shape[1]:
        raise ValueError(
            "`query_embeddings` and `corpus_embeddings` should be 2-D with the same "
            f"dimension. Received shapes {queries.shape} and {corpus.shape}."
        )
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"`k` should be a positive integer. Received: k={k!r}")
    chunk_size = check_positive_int("chunk_size", chunk_size)
    query_chunk_size = check_positive_int("query_chunk_size", query_chunk_size)
    check_bool("normalize", normalize)
    check_bool("use_faiss", use_faiss, allow_none=True)
    k = min(int(k), corpus.shape[0])
    if normalize:
        queries = _normalize(queries)
    if use_faiss is None:
        try:
            import faiss  # noqa: F401

            use_faiss = True
        except ImportError:
            use_faiss = False
    if use_faiss:
        import faiss

        if k == 0:  # an empty corpus, which faiss's search refuses
            return (np.empty((queries.shape[0], 0), dtype=np.float32),
                    np.empty((queries.shape[0], 0), dtype=np.int64))
        index = faiss.IndexFlatIP(corpus.shape[1])
        for _, block in _normalized_chunks(corpus, chunk_size, normalize):
            index.add(np.ascontiguousarray(block))
        scores, indices = index.search(np.ascontiguousarray(queries), k)
        missing = np.flatnonzero((indices < 0).any(axis=1))
        if missing.size:
            # faiss pads with -1 where scores are NaN; as an index that is the last row.
            raise ValueError(
                f"faiss found fewer than k={k} corpus rows for {missing.size} queries (first: "
                f"query row {missing[0]}): the embeddings hold NaN. Received non-finite "
                "`query_embeddings` or `corpus_embeddings`."
            )
        return scores.astype(np.float32), indices.astype(np.int64)
    # Corpus chunks outside, query chunks inside: each corpus chunk is read and
    # normalised once, and each query chunk keeps its running best between them.
    starts = range(0, queries.shape[0], query_chunk_size)
    rows = [min(query_chunk_size, queries.shape[0] - q0) for q0 in starts]
    best = [(np.empty((n, 0), dtype=np.float32), np.empty((n, 0), dtype=np.int64)) for n in rows]
    for c0, block in _normalized_chunks(corpus, chunk_size, normalize):
        for i, q0 in enumerate(starts):
            best_scores, best_index = best[i]
            scores = queries[q0 : q0 + query_chunk_size] @ block.T
            merged = None
            if best_scores.shape[1] == k:
                merged = _merge_above(
                    best_scores, best_index, scores, c0, k, limit=4 * k * scores.shape[0]
                )
            if merged is None:
                chunk_scores, index = _chunk_candidates(scores, c0, k)
                merged = _merge(best_scores, best_index, chunk_scores, index, k)
            best[i] = merged
            del scores
    if not best:
        return np.empty((0, k), dtype=np.float32), np.empty((0, k), dtype=np.int64)
    return np.concatenate([s for s, _ in best]), np.concatenate([j for _, j in best])
