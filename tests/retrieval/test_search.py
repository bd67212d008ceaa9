"""Chunked exact top_k against a brute-force NumPy sort, and its memory bound."""

import tracemalloc

import numpy as np
import pytest

from keras_cosent.retrieval import top_k


def brute_force(q, c, k):
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    s = (q.astype(np.float32) @ c.astype(np.float32).T)
    idx = np.array([np.lexsort((np.arange(s.shape[1]), -row))[:k] for row in s])
    return np.take_along_axis(s, idx, axis=1), idx


@pytest.mark.parametrize("chunk_size,query_chunk_size", [(1, 1), (7, 3), (50, 64), (1000, 5)])
def test_equals_brute_force(chunk_size, query_chunk_size):
    rng = np.random.default_rng(chunk_size)
    # Integer-valued vectors from a tiny set: many exact ties in cosine.
    q = rng.integers(-1, 2, size=(23, 3)).astype(np.float32) + np.array([0, 0, 3.0], np.float32)
    c = rng.integers(-1, 2, size=(57, 3)).astype(np.float32) + np.array([0, 0, 3.0], np.float32)
    scores, indices = top_k(q, c, k=10, chunk_size=chunk_size, query_chunk_size=query_chunk_size)
    ref_scores, ref_indices = brute_force(q, c, 10)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-6)


def test_k_larger_than_corpus_and_bad_inputs():
    scores, indices = top_k(np.ones((2, 3)), np.eye(3), k=10)
    assert indices.shape == (2, 3)
    np.testing.assert_array_equal(indices[0], [0, 1, 2])  # all tied: index order
    with pytest.raises(ValueError, match="same"):
        top_k(np.ones((2, 3)), np.ones((2, 4)), k=1)
    with pytest.raises(ValueError, match="k=0"):
        top_k(np.ones((2, 3)), np.ones((2, 3)), k=0)


def test_peak_memory_is_bounded_by_chunks():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(256, 16)).astype(np.float32)
    c = rng.normal(size=(8000, 16)).astype(np.float32)
    full_matrix_bytes = q.shape[0] * c.shape[0] * 4  # 8 MB
    tracemalloc.start()
    top_k(q, c, k=10, chunk_size=500, query_chunk_size=32, normalize=False)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # Bound: one query chunk x (chunk + k) scores, indices, sort order (~ 32 * 510 * 24 B
    # = 0.4 MB) plus the output; far below the full matrix.
    assert peak < 1024 * 1024, peak
    assert peak < full_matrix_bytes / 8


def test_faiss_path_if_installed():
    pytest.importorskip("faiss")
    rng = np.random.default_rng(1)
    q, c = rng.normal(size=(10, 8)), rng.normal(size=(100, 8))
    _, idx = top_k(q, c, k=5, use_faiss=True)
    np.testing.assert_array_equal(idx, brute_force(q, c, 5)[1])
