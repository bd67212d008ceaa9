"""bench/search_speed.py: the previous form it times is the full sort, and its rows agree."""

import numpy as np

from bench import search_speed
from tests.backends import once_in


def test_full_sort_form_is_a_lexsort_of_every_score():
    rng = np.random.default_rng(0)
    q = rng.integers(-2, 3, size=(9, 4)).astype(np.float32)
    c = rng.integers(-2, 3, size=(130, 4)).astype(np.float32)
    scores, indices = search_speed.full_sort_top_k(q, c, 12, chunk_size=40, query_chunk_size=4)
    exact = q.astype(np.float64) @ c.astype(np.float64).T
    order = np.array([np.lexsort((np.arange(130), -row))[:12] for row in exact])
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(scores, np.take_along_axis(exact, order, axis=1))


@once_in("torch", "times NumPy, faiss and the peer, never Keras")
def test_measure_times_every_method_and_counts_agreement():
    rows = search_speed.measure(num_queries=20, corpus_size=300, dim=8, k=5, rounds=2,
                                full_sort_limit=1000)
    by_method = {row["method"]: row for row in rows}
    assert {"keras-cosent", "peer", "full-sort", "products-only"} <= set(by_method)
    assert by_method["keras-cosent"]["same_as_keras_cosent"] == 20
    assert by_method["full-sort"]["same_as_keras_cosent"] == 20
    assert by_method["products-only"]["same_as_keras_cosent"] is None
    assert len(by_method["peer"]["seconds"]) == 2
    assert "ratio_to_peer" not in by_method["peer"]
    table = search_speed.table(rows)
    assert "| 300 | keras-cosent |" in table and "20 / 20" in table
    # Above the limit the previous form is not run.
    rows = search_speed.measure(20, 300, 8, 5, 1, full_sort_limit=100)
    assert "full-sort" not in {row["method"] for row in rows}
