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


def test_selection_before_sort_equals_brute_force():
    # Chunks far larger than k, so each chunk's k best are picked by partition
    # before the sort. Continuous scores, then scores rounded onto a coarse grid
    # so that the k-th score of most rows is tied with columns left out (the
    # rows that must fall back to a full sort to keep the lowest indices).
    rng = np.random.default_rng(7)
    q = rng.normal(size=(40, 8)).astype(np.float32)
    c = rng.normal(size=(3000, 8)).astype(np.float32)
    scores, indices = top_k(q, c, k=25, chunk_size=700, query_chunk_size=16)
    ref_scores, ref_indices = brute_force(q, c, 25)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-6)

    # Small integer vectors, unnormalised: every score is an exact integer,
    # whatever the order of the sums, so the ties are exact on both sides.
    int_q = rng.integers(-2, 3, size=(40, 8)).astype(np.float32)
    int_c = rng.integers(-2, 3, size=(3000, 8)).astype(np.float32)
    exact = int_q.astype(np.float64) @ int_c.astype(np.float64).T
    ref_order = np.array([np.lexsort((np.arange(3000), -row)) for row in exact])
    ranked = np.take_along_axis(exact, ref_order, axis=1)
    assert np.mean(ranked[:, 24] == ranked[:, 25]) > 0.8  # ties at the boundary
    for chunk_size in (700, 4096):  # the whole corpus in one chunk: every tie there
        _, indices = top_k(int_q, int_c, k=25, chunk_size=chunk_size, query_chunk_size=16,
                           normalize=False)
        np.testing.assert_array_equal(indices, ref_order[:, :25])


def test_later_chunk_better_than_all_before():
    # The corpus in ascending order of score for every query: each chunk beats
    # all the chunks before it, so every column passes the running k-th best
    # (the path that partitions the chunk instead).
    rng = np.random.default_rng(3)
    q = np.abs(rng.normal(size=(6, 4))).astype(np.float32) + 0.1
    c = np.zeros((500, 4), dtype=np.float32)
    c[:, 0] = np.arange(500)  # score of document j: q[:, 0] * j
    _, indices = top_k(q, c, k=8, chunk_size=50, query_chunk_size=4, normalize=False)
    np.testing.assert_array_equal(indices, np.tile(np.arange(499, 491, -1), (6, 1)))


def test_nan_scores_rank_last():
    c = np.array([[1.0, 0.0], [np.nan, 0.0], [0.6, 0.8], [0.0, 1.0], [np.nan, 1.0]])
    for chunk_size in (1, 2, 4, 8):
        _, indices = top_k(np.array([[1.0, 0.2]]), c, k=5, chunk_size=chunk_size)
        np.testing.assert_array_equal(indices, [[0, 2, 3, 1, 4]])
        _, indices = top_k(np.array([[1.0, 0.2]]), c, k=2, chunk_size=chunk_size)
        np.testing.assert_array_equal(indices, [[0, 2]])
    # A NaN query: every score NaN, ranked by index.
    _, indices = top_k(np.array([[np.nan, 0.0], [0.0, 1.0]]), c, k=3, chunk_size=2)
    np.testing.assert_array_equal(indices, [[0, 1, 2], [3, 2, 0]])


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
    # Bound: one query chunk x chunk of scores, the partition's order and a mask
    # (~ 32 * 500 * 13 B = 0.2 MB) plus the output; far below the full matrix.
    assert peak < 1024 * 1024, peak
    assert peak < full_matrix_bytes / 8


def test_memory_bound_holds_when_later_chunks_beat_the_running_top_k():
    # Scores rise along the corpus, so most of every later chunk beats the running
    # k-th best: the merge must fall back to the partition before listing them all.
    rng = np.random.default_rng(0)
    q = np.abs(rng.normal(size=(256, 8))).astype(np.float32)
    rising = np.linspace(-1, 1, 4 * 4096, dtype=np.float32)[:, None] * np.ones((1, 8), np.float32)
    c = rising + 0.01 * rng.normal(size=rising.shape).astype(np.float32)
    tracemalloc.start()
    _, indices = top_k(q, c, k=10, chunk_size=4096, query_chunk_size=256)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    documented = 256 * 4096 * 13 + 4096 * 8 * 4  # the docstring's bound plus one chunk
    assert peak < 1.05 * documented, (peak, documented)
    np.testing.assert_array_equal(indices, brute_force(q, c, 10)[1])


def test_faiss_refuses_nan_rather_than_returning_minus_one_and_takes_an_empty_corpus():
    pytest.importorskip("faiss")
    corpus = np.array([[1.0, 0.0], [0.9, 0.1], [np.nan, 0.0], [0.0, 1.0]], np.float32)
    with pytest.raises(ValueError, match=r"faiss found fewer than k=4 corpus rows for 1 "
                                         r"queries \(first: query row 0\)"):
        top_k(np.array([[1.0, 0.0]]), corpus, 4, use_faiss=True)
    for use_faiss in (False, True):
        scores, indices = top_k(np.ones((1, 2)), np.zeros((0, 2)), 5, use_faiss=use_faiss)
        assert scores.shape == indices.shape == (1, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_corpus_is_normalised_chunk_by_chunk_not_copied_whole(dtype):
    rng = np.random.default_rng(0)
    q = rng.normal(size=(8, 64)).astype(np.float32)
    c = rng.normal(size=(20000, 64)).astype(dtype)
    tracemalloc.start()
    scores, indices = top_k(q, c, k=10, chunk_size=1000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    float32_corpus_bytes = c.shape[0] * c.shape[1] * 4  # 5.1 MB
    assert peak < float32_corpus_bytes / 4, peak  # a chunk is 0.26 MB
    ref_scores, ref_indices = brute_force(q, c, 10)
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-6)


def test_faiss_path():
    import faiss  # noqa: F401
    rng = np.random.default_rng(1)
    q, c = rng.normal(size=(10, 8)), rng.normal(size=(100, 8))
    _, idx = top_k(q, c, k=5, use_faiss=True)
    np.testing.assert_array_equal(idx, brute_force(q, c, 5)[1])


@pytest.mark.parametrize("k", [0, 2.5, "3", True])
def test_k_must_be_a_positive_int(k):
    with pytest.raises(ValueError, match=r"`k` should be a positive integer. Received: k="):
        top_k(np.ones((1, 2)), np.ones((3, 2)), k=k)


@pytest.mark.parametrize("kwargs, match", [
    ({"use_faiss": "no"}, r"`use_faiss` should be a bool \(True or False\) or None. "
                          r"Received: `use_faiss`='no'"),
    ({"use_faiss": 0}, "`use_faiss`=0"),
    ({"normalize": "no"}, "`normalize` should be a bool"),
    ({"chunk_size": 2.5}, "`chunk_size` should be a positive int. Received: `chunk_size`=2.5"),
    ({"chunk_size": 0}, "`chunk_size`=0"),
    ({"query_chunk_size": True}, "`query_chunk_size` should be a positive int"),
])
def test_options_must_have_their_type(kwargs, match):
    with pytest.raises(ValueError, match=match):
        top_k(np.ones((1, 2)), np.ones((3, 2)), k=1, **kwargs)


def test_numpy_ints_are_ints():
    _, indices = top_k(np.ones((1, 2)), np.eye(2), k=np.int64(1), chunk_size=np.int32(1),
                       query_chunk_size=np.int64(1))
    assert indices.tolist() == [[0]]
