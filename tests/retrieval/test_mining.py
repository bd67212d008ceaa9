"""Hard-negative mining on a hand-made example with an independent expectation."""

import tracemalloc

import numpy as np
import pytest

from keras_cosent.data import read_retrieval_triplets
from keras_cosent.data import write_retrieval_triplets
from keras_cosent.retrieval import mine_hard_negatives


def unit(angle_deg):
    a = np.deg2rad(angle_deg)
    return np.array([np.cos(a), np.sin(a)])


# Query at angle 0; cosine to a document at angle t is cos(t).
ANGLES = {"pos": 30, "unlabelled_dup": 5, "other_pos": 10, "n1": 40, "n2": 50, "n3": 60, "far": 170}
CORPUS = {d: f"text {d}" for d in ANGLES}
C_EMB = np.stack([unit(a) for a in ANGLES.values()])
Q_EMB = np.stack([unit(0)])


def mine(**kwargs):
    return mine_hard_negatives(
        {"q": "the query"}, CORPUS, {"q": {"pos": 1, "other_pos": 2}},
        query_embeddings=Q_EMB, corpus_embeddings=C_EMB, **kwargs)


def test_excludes_positives_and_keeps_rank_order():
    rows, report = mine(num_negatives=2)
    # Two rows, one per positive. Positives removed; best remaining: unlabelled_dup, n1.
    assert [r[:2] for r in rows] == [["the query", "text pos"], ["the query", "text other_pos"]]
    assert rows[0][2:] == ["text unlabelled_dup", "text n1"]
    assert report == {"rows": 2, "queries": 1, "short_rows": 0, "short_queries": 0, "filled_rows": 0,
                      "blank_rows": 0, "blank_documents": 0, "repeated_documents": 0,
                      "num_negatives": 2}


def test_pairs_with_a_blank_query_or_positive_make_no_row_and_are_counted():
    corpus = {**CORPUS, "pos": "  "}
    rows, report = mine_hard_negatives(
        {"q": "the query", "blank": "\t"}, corpus,
        {"q": {"pos": 1, "other_pos": 2}, "blank": {"n1": 1}},
        query_embeddings=np.stack([unit(0), unit(0)]), corpus_embeddings=C_EMB,
        num_negatives=2)
    # The blank positive is left out, yet stays off limits as a negative.
    assert rows == [["the query", "text other_pos", "text unlabelled_dup", "text n1"]]
    assert report["rows"] == 1 and report["blank_rows"] == 2


def test_a_blank_document_is_never_a_negative_and_the_search_reaches_past_it():
    # Blank texts where the two nearest non-positives were: mined negatives are the
    # next two by rank, not the blanks, and the random fill never draws them.
    corpus = {**CORPUS, "unlabelled_dup": "", "n1": " \n"}
    rows, report = mine_hard_negatives(
        {"q": "the query"}, corpus, {"q": {"pos": 1}}, query_embeddings=Q_EMB,
        corpus_embeddings=C_EMB, num_negatives=2, range_max=2)
    assert rows == [["the query", "text pos", "text other_pos", "text n2"]]
    assert report["blank_documents"] == 2 and report["short_rows"] == 0
    rows, report = mine_hard_negatives(
        {"q": "the query"}, corpus, {"q": {"pos": 1}}, query_embeddings=Q_EMB,
        corpus_embeddings=C_EMB, num_negatives=10, range_max=1, fill="random")
    assert sorted(rows[0][2:]) == ["text far", "text n2", "text n3", "text other_pos"]
    assert report["short_rows"] == 1 and report["filled_rows"] == 0


def test_absolute_margin_drops_candidates_near_or_above_positive():
    rows, _ = mine(num_negatives=2, margin=0.0)
    # Row of "pos" (cos 30 deg = 0.866): keep candidates with cos <= 0.866: n1 (40), n2 (50).
    assert rows[0][2:] == ["text n1", "text n2"]
    # Row of "other_pos" (cos 10 deg): unlabelled_dup (cos 5 deg) is above it.
    assert rows[1][2:] == ["text n1", "text n2"]
    rows, _ = mine(num_negatives=2, margin=np.cos(np.deg2rad(30)) - np.cos(np.deg2rad(45)))
    assert rows[0][2:] == ["text n2", "text n3"]


def test_a_duplicate_of_the_positive_is_at_the_margin_not_above_it():
    # A document with the positive's embedding scores exactly as much: margin 0
    # drops only candidates above the positive, so the duplicate is kept (first,
    # being the nearest), in every draw. Its score and the positive's come from one
    # search, not from sums in two orders that differ in the last bit.
    rng = np.random.default_rng(0)
    for _ in range(20):
        query = rng.normal(size=(1, 384)).astype("float32")
        corpus = rng.normal(size=(30, 384)).astype("float32")
        corpus[0] = query[0] + 0.1 * corpus[0]  # the positive, nearest to the query
        corpus[1] = corpus[0]
        for kwargs in ({"margin": 0.0}, {"relative_margin": 0.0}):
            rows, _ = mine_hard_negatives(
                ["q"], [f"doc{j}" for j in range(30)], [[0]], query_embeddings=query,
                corpus_embeddings=corpus, num_negatives=3, **kwargs)
            assert rows[0][2] == "doc1", (kwargs, rows[0])


def test_a_text_held_under_two_ids_is_one_candidate():
    # "n1_copy" (41 deg) holds n1's text. By rank, the non-positive texts are
    # unlabelled_dup, n1 (twice), n2, n3, far: a row takes n1 once, and the rank
    # window counts texts, not ids.
    corpus = {**CORPUS, "n1_copy": CORPUS["n1"]}
    c_emb = np.concatenate([C_EMB, unit(41)[None]])

    def mined(**kwargs):
        return mine_hard_negatives(
            {"q": "the query"}, corpus, {"q": {"pos": 1, "other_pos": 2}},
            query_embeddings=Q_EMB, corpus_embeddings=c_emb, **kwargs)

    rows, report = mined(num_negatives=3, range_max=3)
    assert [r[2:] for r in rows] == [["text unlabelled_dup", "text n1", "text n2"]] * 2
    assert report["repeated_documents"] == 1 and report["short_rows"] == 0
    rows, _ = mined(num_negatives=3, range_min=1, range_max=3)
    assert rows[0][2:] == ["text n1", "text n2"]
    # The fill draws each remaining text once: 5 texts in all, so 6 leave the row short.
    for seed in range(5):
        rows, report = mined(num_negatives=6, range_max=1, fill="random", seed=seed)
        for row in rows:
            assert row[2] == "text unlabelled_dup"
            assert sorted(row[3:]) == ["text far", "text n1", "text n2", "text n3"]
        assert report["short_rows"] == 2 and report["filled_rows"] == 0


@pytest.mark.parametrize("entries", [None, 1])
def test_copies_that_crowd_the_search_still_leave_a_window_of_range_max_texts(
        entries, monkeypatch):
    # The search went at most range_max ranks deeper for copies: 6 copies of one
    # text at the top left a window of 3 texts holding one ("a"), and the row
    # short, where the rank window counts texts: a, b, c. A second query, whose
    # window was full, is unchanged. With `entries` 1, every deeper search runs
    # one query at a time, doubling its depth until the window fills.
    if entries is not None:
        import keras_cosent.retrieval.mining as mining

        monkeypatch.setattr(mining, "_DEEPER_SEARCH_ENTRIES", entries)
    angles = [0, 10, 10, 10, 10, 10, 10, 20, 30, 40, 80]
    corpus = ["pos"] + ["a"] * 6 + ["b", "c", "d", "far"]
    queries = ["q", "r"]
    rows, report = mine_hard_negatives(
        queries, corpus, [[0], [10]], query_embeddings=np.stack([unit(0), unit(80)]),
        corpus_embeddings=np.stack([unit(a) for a in angles]), num_negatives=3, range_max=3)
    # Independently: every text once by its best cosine, positives out, the first 3.
    for query, angle, pos, row in zip(queries, (0, 80), (0, 10), rows):
        best = {}
        for j, (text, a) in enumerate(zip(corpus, angles)):
            if j != pos:
                best[text] = max(best.get(text, -2.0), np.cos(np.deg2rad(a - angle)))
        want = sorted(best, key=lambda t: -best[t])[:3]
        assert row == [query, corpus[pos]] + want
    assert rows[0][2:] == ["a", "b", "c"] and report["short_rows"] == 0


def test_a_copy_of_the_positive_text_is_never_a_negative():
    # "unlabelled_dup" (the nearest non-positive, at 5 deg) holds the text of the
    # positive "other_pos" under another id: it is that positive, never a negative of
    # the query, mined (the window reaching past it) or drawn by the fill.
    corpus = {**CORPUS, "unlabelled_dup": CORPUS["other_pos"]}
    rows, report = mine_hard_negatives(
        {"q": "the query", "r": "another"}, corpus,
        {"q": {"pos": 1, "other_pos": 2}, "r": {"n3": 1}},
        query_embeddings=np.stack([unit(0), unit(0)]), corpus_embeddings=C_EMB,
        num_negatives=2, range_max=2)
    assert [r[2:] for r in rows[:2]] == [["text n1", "text n2"]] * 2
    # For another query, whose positives it does not copy, it is a negative as before,
    # once: "other_pos" (10 deg) holds the same text, and the next text is taken instead.
    assert rows[2] == ["another", "text n3", "text other_pos", "text pos"]
    assert report["rows"] == 3 and report["queries"] == 2
    rows, _ = mine_hard_negatives(
        {"q": "the query"}, corpus, {"q": {"other_pos": 1}}, query_embeddings=Q_EMB,
        corpus_embeddings=C_EMB, num_negatives=5, range_max=1, margin=-1.0, fill="random")
    assert "text other_pos" not in rows[0][2:] and len(rows[0]) == 2 + 5


def test_queries_with_one_text_share_their_positives():
    # Two ids with the same text, each with its own positive: each one's positive
    # was the other's nearest negative, the same anchor pulled to and pushed from
    # one document (the peer's miner merges queries by text).
    rows, report = mine_hard_negatives(
        {"a": "the query", "b": "the query", "c": "another"}, CORPUS,
        {"a": {"pos": 1}, "b": {"other_pos": 1}, "c": {"n3": 1}},
        query_embeddings=np.stack([unit(0)] * 3), corpus_embeddings=C_EMB,
        num_negatives=2)
    assert rows[:2] == [["the query", "text pos", "text unlabelled_dup", "text n1"],
                        ["the query", "text other_pos", "text unlabelled_dup", "text n1"]]
    # A query with another text still takes them: they are not its positives.
    assert rows[2] == ["another", "text n3", "text unlabelled_dup", "text other_pos"]
    assert report["short_rows"] == 0


def test_relative_margin_and_range_and_shortfall():
    # Row of "pos": threshold cos(30)*(1-0.3) = 0.606 drops n1 (0.766) and n2 (0.643);
    # the window of the 4 best non-positives (dup, n1, n2, n3) leaves only n3.
    rows, report = mine(num_negatives=3, relative_margin=0.3, range_max=4)
    assert rows[0][2:] == ["text n3"]
    assert report["short_rows"] == 2 and report["short_queries"] == 1
    rows, _ = mine(num_negatives=2, range_min=1, range_max=3)
    assert rows[0][2:] == ["text n1", "text n2"]


def test_relative_margin_below_a_negative_positive_cosine():
    # Positive at 120 deg (cos -0.5): sentence-transformers' relative margin keeps
    # candidates up to -0.5 - 0.5 * 0.1 = -0.55, below the positive, as it does for
    # a positive cosine. "above" (115 deg, -0.423) outscores the positive; "close"
    # (122 deg, -0.530) is within the margin; "below" (130 deg, -0.643) passes.
    # (1 - 0.1) times the positive (-0.45) would keep the first two.
    angles = {"pos": 120, "above": 115, "close": 122, "below": 130}
    rows, _ = mine_hard_negatives(
        {"q": "the query"}, {d: f"text {d}" for d in angles}, {"q": {"pos": 1}},
        query_embeddings=Q_EMB, corpus_embeddings=np.stack([unit(a) for a in angles.values()]),
        num_negatives=3, relative_margin=0.1)
    assert rows == [["the query", "text pos", "text below"]]


def test_random_fill_completes_short_rows_with_documents_the_margin_accepts():
    # As above, "pos" keeps n3 and may add only documents under 0.606 outside the
    # positives: "far" alone, so the row stays one short. "other_pos" (threshold
    # cos(10)*0.7 = 0.689) keeps n2, n3 from the window and gets "far" outside it.
    rows, report = mine(num_negatives=3, relative_margin=0.3, range_max=4, fill="random")
    assert rows[0][2:] == ["text n3", "text far"]
    assert rows[1][2:] == ["text n2", "text n3", "text far"]
    assert report["short_rows"] == 2 and report["filled_rows"] == 1
    unfilled, _ = mine(num_negatives=3, relative_margin=0.3, range_max=4)
    assert [r[:len(u)] for r, u in zip(rows, unfilled)] == unfilled


def test_random_fill_without_a_margin_takes_every_other_document_when_asked_for_more():
    # No margin: every non-positive document is acceptable, 5 of them. Asking for 6
    # keeps the window's best (unlabelled_dup) and fills the other 4, then runs out.
    rows, report = mine(num_negatives=6, range_max=1, fill="random", seed=3)
    others = {f"text {d}" for d in ANGLES if d not in ("pos", "other_pos")}
    for row in rows:
        assert row[2] == "text unlabelled_dup"
        assert len(row[2:]) == len(set(row[2:])) == 5 and set(row[2:]) == others
    assert report["short_rows"] == 2 and report["filled_rows"] == 0


def test_random_fill_draws_seeded_varied_negatives_below_the_margin():
    rng = np.random.default_rng(0)
    docs = rng.normal(size=(400, 8))
    queries = rng.normal(size=(30, 8))
    positives = [[int(i)] for i in rng.integers(400, size=30)]
    corpus = [f"d{i}" for i in range(400)]
    kwargs = dict(query_embeddings=queries, corpus_embeddings=docs, num_negatives=2,
                  range_max=5, relative_margin=0.2, fill="random", seed=7)
    rows, report = mine_hard_negatives([f"q{i}" for i in range(30)], corpus, positives, **kwargs)
    again, _ = mine_hard_negatives([f"q{i}" for i in range(30)], corpus, positives, **kwargs)
    assert rows == again and report["filled_rows"] == report["short_rows"] > 0
    qn = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    dn = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    drawn = set()
    for i, row in enumerate(rows):
        assert len(row) == 4 and len(set(row[2:])) == 2
        pos_score = qn[i] @ dn[positives[i][0]]
        for text in row[2:]:
            j = int(text[1:])
            assert j != positives[i][0]
            assert qn[i] @ dn[j] <= pos_score * 0.8 + 1e-12
            drawn.add(j)
    assert len(drawn) > 20


def test_the_corpus_is_never_copied_whole():
    rng = np.random.default_rng(0)
    docs = rng.normal(size=(20000, 384))  # float64: a float32 copy would be 31 MB
    queries = rng.normal(size=(3, 384))
    corpus = [f"d{i}" for i in range(len(docs))]
    qids = ["q0", "q1", "q2"]
    tracemalloc.start()
    # A margin no random document meets: the random fill falls back to scoring
    # every document (chunk by chunk) and finds none.
    rows, report = mine_hard_negatives(
        qids, corpus, [[0], [1], [2]], query_embeddings=queries, corpus_embeddings=docs,
        num_negatives=2, range_max=10, margin=1.5, fill="random", chunk_size=1000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # Ids, texts and their index take about 3 MB; a chunk of 1,000 rows, 1.5 MB.
    assert peak < docs.shape[0] * docs.shape[1] * 4 / 3, peak
    assert report["short_rows"] == 3 and report["filled_rows"] == 0
    assert all(len(row) == 2 for row in rows)


def test_random_sampling_is_seeded_and_within_window(tmp_path):
    a, _ = mine(num_negatives=2, sampling="random", seed=3)
    b, _ = mine(num_negatives=2, sampling="random", seed=3)
    assert a == b
    window = {"text unlabelled_dup", "text n1", "text n2", "text n3", "text far"}
    assert all(set(r[2:]) <= window and len(r) == 4 for r in a)
    # A window of the 4 best non-positives (dup, n1, n2, n3), 2 drawn: over seeds
    # every one of the 6 pairs comes up, never "far" (outside the window), each pair
    # in rank order.
    rank = ["text unlabelled_dup", "text n1", "text n2", "text n3"]
    drawn = set()
    for seed in range(40):
        rows, _ = mine(num_negatives=2, sampling="random", seed=seed, range_max=4)
        for r in rows:
            assert set(r[2:]) <= set(rank) and r[2:] == sorted(r[2:], key=rank.index), r
            drawn.add(tuple(r[2:]))
    assert len(drawn) == 6, drawn
    path = tmp_path / "t.jsonl"
    write_retrieval_triplets(a, path)
    ds = read_retrieval_triplets(path)
    assert [list(r) for r in zip(*ds.columns)] == a


def test_bad_arguments():
    with pytest.raises(ValueError, match="sampling"):
        mine(sampling="best")
    with pytest.raises(ValueError, match="`fill`.*'hard'"):
        mine(fill="hard")
    with pytest.raises(ValueError, match="range_min"):
        mine(range_min=5, range_max=5)
    with pytest.raises(ValueError, match="unknown documents"):
        mine_hard_negatives({"q": "x"}, CORPUS, {"q": {"nope": 1}},
                            query_embeddings=Q_EMB, corpus_embeddings=C_EMB)


def test_ignore_identical_ids_never_takes_the_query_itself():
    # ArguAna-like: the query "q" is also the corpus document "q" (the same text, angle 0).
    corpus = {"q": "the query", **CORPUS}
    c_emb = np.concatenate([Q_EMB, C_EMB])
    qrels = {"q": {"pos": 1}}
    kwargs = dict(query_embeddings=Q_EMB, corpus_embeddings=c_emb, num_negatives=2)
    rows, _ = mine_hard_negatives({"q": "the query"}, corpus, qrels, **kwargs)
    assert rows[0][2:] == ["the query", "text unlabelled_dup"]  # itself, the nearest
    rows, _ = mine_hard_negatives({"q": "the query"}, corpus, qrels, ignore_identical_ids=True,
                                  **kwargs)
    assert rows[0][2:] == ["text unlabelled_dup", "text other_pos"]
    # Nor drawn by the random fill: asked for every other document, it gets all but itself.
    rows, report = mine_hard_negatives(
        {"q": "the query"}, corpus, qrels, ignore_identical_ids=True, fill="random",
        query_embeddings=Q_EMB, corpus_embeddings=c_emb, num_negatives=len(corpus), range_max=2)
    assert sorted(rows[0][2:]) == sorted(t for d, t in corpus.items() if d not in ("q", "pos"))
    assert report["short_rows"] == 1 and report["filled_rows"] == 0


def test_ignore_identical_ids_searches_one_deeper():
    # The query's own document ranks first; left out, the window of 3 below the one
    # positive still holds 3 candidates (dup, other_pos, n1): the search must reach
    # rank 5 of the 8 documents (3 + the positive + the query itself).
    corpus = {"q": "the query", **CORPUS}
    rows, report = mine_hard_negatives(
        {"q": "the query"}, corpus, {"q": {"pos": 1}}, ignore_identical_ids=True,
        query_embeddings=Q_EMB, corpus_embeddings=np.concatenate([Q_EMB, C_EMB]),
        num_negatives=3, range_max=3)
    assert rows[0][2:] == ["text unlabelled_dup", "text other_pos", "text n1"]
    assert report["short_rows"] == 0


def mine_lists(positives=((0,),), **kwargs):
    arguments = dict(query_embeddings=np.ones((1, 2)), corpus_embeddings=np.eye(3)[:, :2] + 0.1)
    arguments.update(kwargs)
    return mine_hard_negatives(["q"], ["a", "b", "c"], [list(p) for p in positives],
                               **arguments)


@pytest.mark.parametrize("kwargs, match", [
    ({"query_embeddings": np.ones((2, 2))},
     r"`query_embeddings` should have one row per text of `queries`: shape \(1, dim\). "
     r"Received shape \(2, 2\)"),
    ({"corpus_embeddings": np.ones((4, 2))},
     r"`corpus_embeddings` should have one row per text of `corpus`: shape \(3, dim\). "
     r"Received shape \(4, 2\)"),
    ({"corpus_embeddings": np.ones((2, 2))}, r"Received shape \(2, 2\)"),
    ({"corpus_embeddings": np.ones(3)}, r"Received shape \(3,\)"),
    ({"positives": [(7,)]}, r"`positives\[0\]` should hold corpus indices, ints from 0 to 2. "
                            "Received: 7"),
    ({"positives": [(-1,)]}, r"`positives\[0\]`.*Received: -1"),
    ({"positives": [(1.0,)]}, r"`positives\[0\]`.*Received: 1.0"),
    ({"positives": [(0,), (1,)]}, r"one list per query \(1\). Received 2"),
    ({"num_negatives": 1.9}, "`num_negatives` should be a positive int. "
                             "Received: `num_negatives`=1.9"),
    ({"num_negatives": 0}, "`num_negatives`=0"),
    ({"range_max": 2.5}, "`range_max` should be a positive int"),
    ({"range_min": -1}, "`range_min` should be an int >= 0"),
    ({"margin": float("nan")}, "`margin` should be a finite float. Received: `margin`=nan"),
    ({"relative_margin": float("nan")}, "`relative_margin` should be a finite float"),
    ({"relative_margin": 1.0}, r"`relative_margin` should be in \[0, 1\)"),
    ({"use_faiss": "no"}, "`use_faiss` should be a bool"),
    ({"ignore_identical_ids": "yes"}, "`ignore_identical_ids` should be a bool"),
    ({"chunk_size": 0}, "`chunk_size` should be a positive int"),
])
def test_arguments_are_checked_before_any_search(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mine_lists(**kwargs)


class CountingEncoder:
    def __init__(self, rows=None):
        self.calls, self.rows = 0, rows

    def encode(self, texts, batch_size=32):
        self.calls += 1
        return np.ones((self.rows or len(texts), 2))


def test_precomputed_embeddings_are_checked_before_encoding_the_other_side():
    encoder = CountingEncoder()
    with pytest.raises(ValueError, match="`corpus_embeddings` should have one row"):
        mine_hard_negatives(["q"], ["a", "b", "c"], [[0]], encoder=encoder,
                            corpus_embeddings=np.ones((2, 2)))
    assert encoder.calls == 0
    with pytest.raises(ValueError, match=r"`encoder.encode\(queries\)` should have one row "
                                         r"per text of `queries`.*\(5, 2\)"):
        mine_hard_negatives(["q"], ["a", "b", "c"], [[0]], encoder=CountingEncoder(rows=5))
    with pytest.raises(ValueError, match="`encoder` should be an object with an `encode.*not a "
                                         "string"):
        mine_hard_negatives(["q"], ["a", "b", "c"], [[0]], encoder="all-MiniLM-L6-v2")
    with pytest.raises(TypeError, match="`queries` should be a mapping {id: text} or a list"):
        mine_hard_negatives("q", ["a", "b", "c"], [[0]], encoder=encoder)
    with pytest.raises(ValueError, match="`corpus` should hold at least one document"):
        mine_hard_negatives(["q"], [], [[]], encoder=encoder)


def test_qrels_ids_are_compared_as_strings_and_must_meet_the_queries():
    # Int ids name the same queries and documents as their strings, as in the evaluator.
    rows, _ = mine_hard_negatives({1: "the query"}, {**CORPUS, 7: "text 7"},
                                  {1: {"pos": 1, 7: 0}}, query_embeddings=Q_EMB,
                                  corpus_embeddings=np.concatenate([C_EMB, [unit(90)]]),
                                  num_negatives=1)
    assert rows == [["the query", "text pos", "text unlabelled_dup"]]
    with pytest.raises(ValueError, match=r"`positives` name 1 queries that `queries` lacks.*"
                                         r"\['x'\] \(str\).*\['q'\] \(str\)"):
        mine_hard_negatives({"q": "the query"}, CORPUS, {"x": {"pos": 1}},
                            query_embeddings=Q_EMB, corpus_embeddings=C_EMB)
    # One unknown query among known ones is refused too, as the evaluator refuses it:
    # its judgements would be dropped without a word.
    with pytest.raises(ValueError, match=r"`positives` name 1 queries that `queries` lacks.*'zz'"):
        mine_hard_negatives({"q": "the query"}, CORPUS, {"q": {"pos": 1}, "zz": {"pos": 1}},
                            query_embeddings=Q_EMB, corpus_embeddings=C_EMB)


@pytest.mark.parametrize("positives, error, match", [
    ({"q": {"pos": "1"}}, ValueError, r"int relevance grades. Received: '1' for query 'q', "
                                      r"document 'pos'"),
    ({"q": {"pos": None}}, ValueError, "Received: None for query 'q'"),
    ({"q": {"pos": 1.5}}, ValueError, "Received: 1.5 for query 'q'"),
    ({"q": ["pos"]}, TypeError, r"`positives` should map each query id to a mapping.*"
                                r"`positives`\['q'\] of type list"),
    ({"q": {"pos": 1}, 1: {}, "1": {}}, ValueError, "`positives` holds two ids that are equal "
                                                    "as strings"),
    ({"q": {"pos": 1, 7: 0, "7": 1}}, ValueError, r"`positives\['q'\]` holds two ids"),
])
def test_qrels_grades_and_ids_are_checked_as_the_evaluator_checks_them(positives, error, match):
    with pytest.raises(error, match=match):
        mine_hard_negatives({"q": "the query"}, CORPUS, positives,
                            query_embeddings=Q_EMB, corpus_embeddings=C_EMB)


def test_ids_equal_as_strings_are_refused_not_merged():
    # 1 and "1" would be one document: the positive and a mined negative at once.
    corpus = {1: "answer A", "1": "answer B", "2": "other"}
    emb = np.stack([unit(0), unit(5), unit(90)])
    with pytest.raises(ValueError, match=r"`corpus` holds two ids that are equal as strings "
                                         r"\(ids are compared as strings\): 1 and '1'"):
        mine_hard_negatives({"q": "query"}, corpus, {"q": {"1": 1}}, query_embeddings=Q_EMB,
                            corpus_embeddings=emb, num_negatives=2)
    with pytest.raises(ValueError, match="`queries` holds two ids"):
        mine_hard_negatives({0: "a", "0": "b"}, corpus, {"0": {"2": 1}},
                            query_embeddings=np.stack([unit(0), unit(1)]),
                            corpus_embeddings=emb)


@pytest.mark.parametrize("use_faiss", [False, True])
@pytest.mark.parametrize("side", ["query", "corpus"])
def test_non_finite_embeddings_are_refused_naming_the_first_bad_id(side, use_faiss):
    if use_faiss:
        pytest.importorskip("faiss")
    q_emb, c_emb = Q_EMB.copy(), C_EMB.copy()
    if side == "query":
        q_emb[0, 1] = np.nan
        match = r"`queries` are not finite \(NaN or inf\) for 1 of the 1 texts \(first: id 'q'\)"
    else:
        c_emb[4, 0] = np.inf
        match = r"`corpus` are not finite \(NaN or inf\) for 1 of the 7 texts \(first: id 'n2'\)"
    with pytest.raises(ValueError, match=match):
        mine_hard_negatives({"q": "the query"}, CORPUS, {"q": {"pos": 1}}, query_embeddings=q_emb,
                            corpus_embeddings=c_emb, num_negatives=3, use_faiss=use_faiss)


def test_the_fill_draws_distinct_texts_when_it_falls_back_to_the_whole_corpus():
    # Rejection sampling that never accepts leaves the draw to the corpus mask:
    # documents 0, 2, 4 share a text, as do 1 and 3; one copy of each text is drawn.
    from keras_cosent.retrieval.mining import _random_fill

    text_id = np.array([0, 1, 0, 1, 0, 5])
    for seed in range(10):
        chosen = _random_fill(np.random.default_rng(seed), text_id, 3, lambda j: False,
                              lambda: np.ones(6, dtype=bool))
        assert sorted(text_id[chosen]) == [0, 1, 5]
        chosen = _random_fill(np.random.default_rng(seed), text_id, 5, lambda j: False,
                              lambda: np.array([True, True, True, True, True, False]))
        assert sorted(text_id[chosen]) == [0, 1]
