"""The pure parts of the losses benchmark (bench/losses.py, bench/peer_losses.py): the
rows each run trains on, the scoring at truncated dimensions, the batch plan the peer
replays and the summary table. No model is loaded."""

import numpy as np
import pytest
import scipy.stats

from bench import losses
from bench.peer_losses import keras_batch_plan


def _scored_pairs(count, seed=0):
    rng = np.random.default_rng(seed)
    first = [f"anchor {i % (count // 2)}" for i in range(count)]  # anchors repeat
    second = [f"positive {i}" for i in range(count)]
    second[3] = first[5]  # a text that is an anchor elsewhere
    scores = rng.choice([0.0, 2.5, 3.99, 4.0, 4.6, 5.0], size=count).tolist()
    return first, second, scores


def test_positive_pairs_keeps_scores_of_4_and_above():
    pairs = losses.positive_pairs(["a", "b", "c", "d"], ["w", "x", "y", "z"],
                                  [4.0, 3.99, 5.0, 0.0])
    assert pairs == [("a", "w"), ("c", "y")]


def test_triplet_rows_negatives_are_other_positives_never_the_anchors_own():
    first, second, scores = _scored_pairs(200)
    pairs = losses.positive_pairs(first, second, scores)
    rows = losses.triplet_rows(pairs, seed=3)
    assert [(a, p) for a, p, _ in rows] == pairs
    own = {}
    for a, p in pairs:
        own.setdefault(a, set()).add(p)
        own.setdefault(p, set()).add(a)
    positives = {p for _, p in pairs}
    for anchor, positive, negative in rows:
        assert negative in positives
        assert negative not in (anchor, positive)
        assert negative not in own[anchor]
    # Random, not a fixed shift: many distinct negatives.
    assert len({n for _, _, n in rows}) > len(rows) // 3


def test_triplet_rows_skip_texts_that_are_the_anchors_own():
    # Few rows sharing texts: an unchecked draw would often pick the anchor itself
    # ("b" for row 1) or another positive of it ("c" for row 0).
    pairs = [("a", "b"), ("b", "c"), ("a", "c"), ("d", "e"), ("e", "f"), ("g", "h")]
    own = {"a": {"b", "c"}, "b": {"a", "c"}, "c": {"a", "b"}, "d": {"e"}, "e": {"d", "f"},
           "g": {"h"}}
    for seed in range(20):
        for anchor, positive, negative in losses.triplet_rows(pairs, seed):
            assert negative != anchor and negative not in own[anchor]


def test_triplet_rows_are_determined_by_the_seed():
    pairs = losses.positive_pairs(*_scored_pairs(200))
    assert losses.triplet_rows(pairs, seed=7) == losses.triplet_rows(pairs, seed=7)
    assert losses.triplet_rows(pairs, seed=7) != losses.triplet_rows(pairs, seed=8)


def test_triplet_rows_refuse_pairs_with_no_possible_negative():
    with pytest.raises(ValueError, match="at least 2"):
        losses.triplet_rows([("a", "b")], seed=0)
    # The only other positive is the anchor's own positive.
    with pytest.raises(ValueError, match="no negative found for row 0"):
        losses.triplet_rows([("a", "b"), ("c", "b")], seed=0, max_draws=50)


def test_build_rows_layouts_match_their_keys():
    first, second, scores = _scored_pairs(40)
    for layout, keys in losses.LAYOUTS.items():
        if layout == "classes":  # built from an NLI file, below
            continue
        rows = losses.build_rows(layout, first, second, scores, data_seed=0)
        assert {len(row) for row in rows} == {len(keys)}
    assert len(losses.build_rows("pairs", first, second, scores, 0)) == 40
    assert (len(losses.build_rows("positives", first, second, scores, 0))
            == sum(s >= 4 for s in scores))


def test_scores_truncated_embeddings_as_the_library_truncates():
    from keras import ops

    from keras_cosent.utils import truncate_embeddings

    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 16)).astype("float32")
    for dim in (16, 8, 3):
        expected = ops.convert_to_numpy(truncate_embeddings(x, dim))
        np.testing.assert_allclose(losses.truncate(x, dim), expected, rtol=1e-5, atol=1e-6)
    sentences = [f"s{i}" for i in range(12)]
    first, second = sentences[:6], sentences[6:][::-1]
    gold = rng.uniform(0, 5, size=6)
    figures = losses.sts_spearman(x, sentences, first, second, gold, (16, 3))
    for dim in (16, 3):
        z = x[:, :dim] / np.linalg.norm(x[:, :dim], axis=1, keepdims=True)
        cosine = [float(z[int(a[1:])] @ z[int(b[1:])]) for a, b in zip(first, second)]
        assert figures[f"spearman@{dim}"] == pytest.approx(
            100 * scipy.stats.spearmanr(cosine, gold).statistic)


def test_batch_plan_is_the_seeded_permutation_per_epoch():
    columns = [[f"a{i}" for i in range(10)], [f"p{i}" for i in range(10)]]
    plan = keras_batch_plan(columns, batch_size=4, seed=5, epochs=2, unique_texts=False)
    for epoch, batches in enumerate(plan):
        order = np.random.default_rng([5, epoch]).permutation(10).tolist()
        assert batches == [order[0:4], order[4:8], order[8:10]]
    assert plan[0] != plan[1]


def test_unique_batch_plan_holds_no_text_twice_and_every_row_once():
    rng = np.random.default_rng(1)
    columns = [[f"a{i}" for i in rng.integers(0, 30, size=60)],
               [f"p{i}" for i in rng.integers(0, 40, size=60)]]
    plan = keras_batch_plan(columns, batch_size=8, seed=2, epochs=2, unique_texts=True)
    assert plan == keras_batch_plan(columns, batch_size=8, seed=2, epochs=2, unique_texts=True)
    for batches in plan:
        assert sorted(i for b in batches for i in b) == list(range(60))
        for batch in batches:
            texts = [c[i] for i in batch for c in columns]
            assert len(texts) == len(set(texts))


def _line(run, stack, seed, wall, **figures):
    return {"run": run, "stack": stack, "seed": seed,
            "figures": {**{f"spearman@{d}": v for d, v in figures.items()},
                        "wall_seconds": wall}}


def test_summary_table_means_ranges_and_gaps():
    lines = [
        _line("matryoshka", "keras-torch", 1, 100.0, **{"384": 85.0, "64": 80.0}),
        _line("matryoshka", "peer", 1, 200.0, **{"384": 84.0, "64": 81.0}),
        _line("matryoshka", "keras-torch", 2, 300.0, **{"384": 86.0, "64": 82.0}),
        _line("matryoshka", "peer", 2, 400.0, **{"384": 85.0, "64": 80.0}),
        _line("triplet", "peer", 1, 50.0, **{"384": 70.0}),
    ]
    rows = [row.split(" | ") for row in losses.summarize(lines).splitlines()[2:]]
    rows = [[cell.strip("| ") for cell in row] for row in rows]
    # keras 384: mean(85, 86) = 85.5, peer mean(84, 85) = 84.5; 64: 81.0 vs 80.5.
    assert rows[0] == ["matryoshka", "384", "1,2", "85.50 (85.00-86.00)", "84.50 (84.00-85.00)",
                       "+1.00", "200 / 300"]
    assert rows[1][:6] == ["matryoshka", "64", "1,2", "81.00 (80.00-82.00)",
                           "80.50 (80.00-81.00)", "+0.50"]
    assert rows[2] == ["triplet", "384", "1", "-", "70.00", "-", "- / 50"]
    assert len(rows) == 3


def test_the_gap_pairs_seeds_and_a_run_counts_once_under_one_setting():
    lines = [_line("mnrl", "keras-torch", seed, 10.0, **{"384": score})
             for seed, score in ((1, 80.0), (2, 84.0), (3, 90.0))]
    lines.append(_line("mnrl", "peer", 1, 10.0, **{"384": 81.0}))
    row = [c.strip("| ") for c in losses.summarize(lines).splitlines()[2].split(" | ")]
    # Seed 1 is the only one both sides ran: 80 - 81, not mean(80, 84, 90) - 81.
    assert row[5] == "-1.00"
    with pytest.raises(SystemExit, match="lines 1 and 5 are the same run"):
        losses.summarize(lines + [_line("mnrl", "keras-torch", 1, 10.0, **{"384": 80.0})])
    smoke = dict(_line("mnrl", "peer", 2, 10.0, **{"384": 60.0}),
                 config={"train_limit": 64, "epochs": 1})
    with pytest.raises(SystemExit, match=r"lines 1 and 5 train mnrl under different settings "
                                         r"\(train_limit, epochs\)"):
        losses.summarize(lines + [smoke])


@pytest.mark.parametrize("scores", [[4.0, 1.0, 5.0, 2.5, 3.0, 0.0], [0.0, 1.0, 2.5, 2.0, 0.5, 1.5]])
def test_the_peers_joint_loss_is_keras_cosents_joint_objective(scores):
    """The peer's joint loss (sentence-transformers' pieces) equals the loss that
    `train --loss infonce:1.0,cosent:0.5` builds, on the same embeddings and scores,
    including a batch with no pair above the threshold (InfoNCE term 0). The peer
    runs on PyTorch: checked once, in the torch test process."""
    import keras

    if keras.backend.backend() != "torch":
        pytest.skip("the peer's loss is checked once, in the torch test process")
    import torch
    import sentence_transformers  # noqa: F401
    from sentence_transformers.sentence_transformer import losses as st_losses

    from bench.peer_losses import joint_from_embeddings
    from keras_cosent.training.objectives import joint_objective

    pairs = np.random.default_rng(1).normal(size=(6, 2, 8)).astype("float32")
    labels = np.asarray(scores, "float32")
    objective = joint_objective("infonce:1.0,cosent:0.5")
    ours = objective.make_loss({"temperature": 0.05, "scale": 20.0}, None)
    # The peer's CoSENTLoss from embeddings needs no model.
    cosent = st_losses.CoSENTLoss(None, scale=20.0)
    theirs = joint_from_embeddings(torch.tensor(pairs[:, 0]), torch.tensor(pairs[:, 1]),
                                   torch.tensor(labels), cosent)
    np.testing.assert_allclose(float(ours(labels, pairs)), float(theirs), rtol=1e-5)


def test_staged_pairs_written_as_tsv_read_back_as_the_recipe_reads_them(tmp_path):
    from keras_cosent.data import read_dataset

    rows = [("一个人在弹吉他", "有人在弹琴", 4.0), ("a cat", "the dog ran", 0.5)]
    path = tmp_path / "pairs.tsv"
    losses.write_tsv(path, rows)
    data = read_dataset(str(path), "pair-tsv")
    assert [list(c) for c in data.columns] == [[r[0] for r in rows], [r[1] for r in rows]]
    np.testing.assert_allclose(data.labels, [4.0, 0.5])
    with pytest.raises(ValueError, match="pair 1 holds a tab"):
        losses.write_tsv(tmp_path / "bad.tsv", [rows[0], ("a\tb", "c", 1.0)])


def test_class_rows_are_entailed_pairs_with_one_class_per_premise(tmp_path):
    """The supcon run's rows: entailment rows only, a class id per premise in order of
    first appearance, and `keras-cosent train --loss supcon` reads them back as two
    views per row with those classes."""
    import json

    from keras_cosent.data import read_dataset
    from keras_cosent.training import OBJECTIVES

    records = [("p1", "e1", "entailment"), ("p1", "c1", "contradiction"),
               ("p2", "e2", "entailment"), ("p1", "e3", "entailment"),
               ("p2", "n2", "neutral"), ("p3", "x", "-")]
    nli = tmp_path / "nli.json"
    nli.write_text("".join(json.dumps({"sentence1": a, "sentence2": b, "label": label}) + "\n"
                           for a, b, label in records), encoding="utf-8")
    rows = losses.class_rows(nli)
    assert rows == [("p1", "e1", 0), ("p2", "e2", 1), ("p1", "e3", 0)]

    path = tmp_path / "classes.jsonl"
    losses.write_rows(path, "classes", rows)
    args = losses.column_args("classes")
    assert args == ["--text-columns", "premise,hypothesis", "--label-column", "label"]
    data = OBJECTIVES["supcon"].prepare(
        read_dataset(str(path), "jsonl", text_columns=args[1].split(","), label_column=args[3]),
        "jsonl")
    assert [list(c) for c in data.columns] == [["p1", "p2", "p1"], ["e1", "e2", "e3"]]
    assert np.asarray(data.labels).tolist() == [0, 1, 0]
    (tmp_path / "none.json").write_text(json.dumps(
        {"sentence1": "a", "sentence2": "b", "label": "neutral"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no entailment rows"):
        losses.class_rows(tmp_path / "none.json")


def test_the_peers_margin_loss_is_keras_cosents_hinge_margin_ranking():
    """The margin run's peer, `TripletLoss(COSINE, margin 0.2)`, equals
    `MarginRankingLoss(margin=0.2)` (hinge) on the same (anchor, positive, negative)
    embeddings, including rows inside and outside the margin. Checked once, on torch."""
    import keras

    if keras.backend.backend() != "torch":
        pytest.skip("the peer's loss is checked once, in the torch test process")
    import torch
    import sentence_transformers  # noqa: F401

    from bench.peer_losses import make_loss
    from keras_cosent.losses import MarginRankingLoss

    rows = np.random.default_rng(2).normal(size=(32, 3, 8)).astype("float32")
    rows[0, 2] = rows[0, 0]  # a negative equal to its anchor: far inside the margin
    rows[1, 1] = rows[1, 0]  # a positive equal to its anchor
    theirs = make_loss(None, "margin").compute_loss_from_embeddings(
        [torch.tensor(rows[:, k]) for k in range(3)], torch.zeros(32))
    ours = MarginRankingLoss(margin=0.2)(np.zeros(32, "float32"), rows)
    np.testing.assert_allclose(float(ours), float(theirs), rtol=1e-5)
