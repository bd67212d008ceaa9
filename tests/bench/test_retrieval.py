"""The pure part of the retrieval benchmark (bench/retrieval.py): the paired,
query-by-query comparison of keras-cosent and the peer. No model is loaded."""

import numpy as np
import pytest

from bench import retrieval


def _line(stack, seed, per_query, train="stsb-en-train", mining="own", variant="mined"):
    return {"stack": stack, "seed": seed, "variant": variant,
            "config": {"train": train, "peer_mining": mining, "epochs": 1},
            "figures": {key: float(np.mean(per_query)) for key in retrieval.FIGURES},
            "per_query_ndcg@10": {f"q{i}": float(v) for i, v in enumerate(per_query)}}


def _row(table):
    rows = [line for line in table.splitlines()[2:]]
    assert len(rows) == 1, table
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


def test_paired_difference_is_the_mean_over_seeds_and_queries():
    rng = np.random.default_rng(0)
    keras = {s: rng.uniform(0, 100, 400) for s in (1, 2, 3)}
    peer = {s: rng.uniform(0, 100, 400) for s in (1, 2, 3)}
    lines = [_line("keras-torch", s, keras[s]) for s in keras]
    lines += [_line("peer", s, peer[s]) for s in peer]
    lines.append(_line("peer", 1, peer[1], mining="ours"))  # another comparison: no keras pair
    train, name, epochs, seeds, queries, gap, counts = _row(retrieval.paired(lines))

    diff = np.mean([keras[s] - peer[s] for s in (1, 2, 3)], axis=0)
    assert (train, name, epochs, seeds, queries) == (
        "stsb-en-train", "keras-torch mined (own mining)", "1", "1,2,3", "400")
    mean, interval = gap.split(" (")
    assert float(mean) == pytest.approx(diff.mean(), abs=0.005)
    low, high = (float(x) for x in interval.rstrip(")").split(" to "))
    # The normal approximation of the mean's 95% interval: half-width 1.96 standard errors.
    half = 1.96 * diff.std(ddof=1) / np.sqrt(diff.size)
    assert low == pytest.approx(diff.mean() - half, abs=0.15 * half)
    assert high == pytest.approx(diff.mean() + half, abs=0.15 * half)
    assert counts == f"{(diff > 0).sum()} / {(diff < 0).sum()} / 0"


def test_paired_constant_difference_has_a_zero_width_interval_and_counts_ties():
    base = np.linspace(0, 100, 50)
    better = base.copy()
    better[:10] += 37.0
    lines = [_line("keras-torch", 1, better), _line("peer", 1, base)]
    _, _, _, _, queries, gap, counts = _row(retrieval.paired(lines))
    assert queries == "50"
    assert gap.startswith(f"{37.0 * 10 / 50:+.2f} (")
    assert counts == "10 / 0 / 40"

    lines = [_line("keras-torch", 1, base), _line("peer", 1, base)]
    assert _row(retrieval.paired(lines))[5] == "+0.00 (+0.00 to +0.00)"


def test_paired_uses_only_queries_both_sides_scored_and_needs_a_pair():
    keras = _line("keras-torch", 1, [10.0, 20.0, 30.0])
    peer = _line("peer", 1, [0.0, 20.0])
    assert _row(retrieval.paired([keras, peer]))[4:6] == ["2", "+5.00 (+0.00 to +10.00)"]
    # Lines without per-query figures (older runs), or without a partner, give no table.
    old = {k: v for k, v in keras.items() if k != "per_query_ndcg@10"}
    assert retrieval.paired([old, peer]) == ""
    assert retrieval.paired([keras, _line("peer", 2, [0.0, 20.0])]) == ""


def test_paired_against_the_recipe_compares_variants_seed_by_seed():
    rng = np.random.default_rng(1)
    mined = {s: rng.uniform(0, 100, 60) for s in (1, 2)}
    in_batch = {s: mined[s] + rng.normal(1.0, 5.0, 60) for s in (1, 2)}
    lines = [_line("keras-torch", s, mined[s]) for s in mined]
    lines += [_line("keras-torch", s, in_batch[s], variant="in-batch") for s in in_batch]
    lines.append(_line("keras-torch", 3, mined[1], variant="no-margin"))  # seed 3: no recipe run
    train, name, epochs, seeds, queries, gap, _ = _row(retrieval.paired(lines, against="mined"))
    assert (name, seeds, queries) == ("keras-torch in-batch", "1,2", "60")
    diff = np.mean([in_batch[s] - mined[s] for s in (1, 2)], axis=0)
    assert gap.startswith(f"{diff.mean():+.2f} (")
    # No peer line: no keras - peer table; the summary holds what the lines allow.
    assert retrieval.paired(lines) == ""
    assert "variant - mined" in retrieval.summary(lines) and "keras - peer" not in \
        retrieval.summary(lines)
