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


def test_a_rows_interval_does_not_depend_on_the_other_lines_of_the_file():
    rng = np.random.default_rng(1)

    def pair(train):
        return [_line("keras-torch", 1, rng.uniform(0, 100, 200), train=train),
                _line("peer", 1, rng.uniform(0, 100, 200), train=train)]

    first, second = pair("stsb-en-train"), pair("ocnli-zh-train")
    alone = _row(retrieval.paired(first))
    together = retrieval.paired(second + first).splitlines()
    assert "| " + " | ".join(alone) + " |" in together


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


@pytest.mark.parametrize("name,source", [("stsb-en-train", "sts-train.csv"),
                                         ("stsb-en-dev", "sts-dev.csv"),
                                         ("stsb-en-test", "sts-test.csv")])
def test_pairs_to_beir_rebuilds_the_shared_retrieval_folders(shared_data, tmp_path, name,
                                                              source):
    """The builder of `--transfer` sets follows the rule that made the shared folders:
    from STS-B's own file it gives their ids, texts and judgements, train's pair of
    two identical sentences left unjudged. (The shared builder kept trailing spaces
    that the project's reader strips; ids still match.)"""
    from keras_cosent.data import read_beir
    from keras_cosent.data import read_sts_benchmark

    split = name.rsplit("-", 1)[-1]
    built = read_beir(retrieval.pairs_to_beir(
        read_sts_benchmark(shared_data / "stsbenchmark" / source), tmp_path / name, split),
        split)
    shared = read_beir(shared_data / "retrieval" / name, split)
    assert built.qrels == shared.qrels
    assert {k: v.strip() for k, v in built.corpus.items()} == \
        {k: v.strip() for k, v in shared.corpus.items()}
    assert {k: v.strip() for k, v in built.queries.items()} == \
        {k: v.strip() for k, v in shared.queries.items()}


def test_pairs_to_beir_judges_pairs_at_the_threshold(tmp_path):
    from keras_cosent.data import PairDataset
    from keras_cosent.data import read_beir

    pairs = PairDataset([["a", "a", "b", "c", "a", "w", "b"],
                         ["x", "y", "x", "z", "x", "w", "b"]],
                        np.array([4.0, 3.9, 5.0, 0.0, 4.5, 5.0, 5.0]), "demo")
    data = read_beir(retrieval.pairs_to_beir(pairs, tmp_path / "set", "test"), "test")
    assert data.corpus == {"d0": "x", "d1": "y", "d2": "z", "d3": "w", "d4": "b"}
    # "c" has no pair scoring 4 or more; "w" and "b" = "b" would find themselves.
    assert data.queries == {"q0": "a", "q1": "b"}
    assert data.qrels == {"q0": {"d0": 1}, "q1": {"d0": 1}}


def test_transfer_sets_are_further_test_sets_in_the_summary():
    rng = np.random.default_rng(2)
    keras = {s: rng.uniform(0, 100, 80) for s in (1, 2)}
    peer = {s: rng.uniform(0, 100, 80) for s in (1, 2)}
    lines = []
    for stack, values in (("keras-torch", keras), ("peer", peer)):
        for s in values:
            line = _line(stack, s, rng.uniform(0, 100, 30))
            line["transfer"] = {"sts-b-zh-test": {
                "figures": _line(stack, s, values[s])["figures"],
                "per_query_ndcg@10": _line(stack, s, values[s])["per_query_ndcg@10"]}}
            lines.append(line)
    rows = [r for r in retrieval.summary(lines).splitlines()
            if r.startswith("| stsb-en-train -> sts-b-zh-test |")]
    # One summary row per stack, one paired row: the transfer set's own figures.
    assert len(rows) == 3, retrieval.summary(lines)
    keras_row = [c.strip() for c in rows[0].strip("|").split("|")]
    values = [float(np.mean(keras[s])) for s in (1, 2)]
    assert keras_row[4] == f"{np.mean(values):.2f} ({min(values):.2f}-{max(values):.2f})"
    paired_row = [c.strip() for c in rows[2].strip("|").split("|")]
    diff = np.mean([keras[s] - peer[s] for s in (1, 2)], axis=0)
    assert paired_row[5].startswith(f"{diff.mean():+.2f} (")


def test_carve_dev_writes_the_library_split_as_folders(tmp_path):
    import json
    import pathlib

    from keras_cosent.data import hold_out_queries
    from keras_cosent.data import read_beir

    source = tmp_path / "set"
    (source / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": "T" if i % 2 else "", "text": f"doc {i}"} for i in range(40)]
    queries = [{"_id": f"q{i}", "text": f"query {i}"} for i in range(12)]
    # Out of id order, two judgements for q3, a document shared by q1 and q2.
    judgements = ["q3\td3\t1", "q1\td30\t1", "q2\td30\t2"] + [
        f"q{i}\td{i}\t1" for i in (0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11)]
    for name, rows in (("corpus.jsonl", docs), ("queries.jsonl", queries)):
        (source / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (source / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(j + "\n" for j in judgements), encoding="utf-8")
    folders = retrieval.carve_dev(pathlib.Path(source), "train", 4, tmp_path / "runs",
                                  distractors=5)
    expected = hold_out_queries(read_beir(source, "train"), 4, seed=0, distractors=5)
    for (name, folder), part in zip(folders.items(), expected):
        written = read_beir(folder, name)
        assert (written.corpus, written.qrels) == (part.corpus, part.qrels)
        assert list(written.queries) == sorted(part.queries)
        assert written.queries == part.queries


def test_a_run_written_twice_to_the_file_is_refused():
    # A command rerun onto the same --out appends the same runs again: the summary
    # would average them in twice and pair each with the same peer line twice.
    lines = [_line("keras-torch", 1, [1.0, 0.0]), _line("peer", 1, [0.0, 1.0]),
             _line("keras-torch", 2, [1.0, 1.0])]
    assert retrieval.summary(lines)
    with pytest.raises(SystemExit, match="lines 1 and 4 are the same run"):
        retrieval.summary(lines + [_line("keras-torch", 1, [0.5, 0.5])])
    # the same seed of another variant, or with the peer's other mining, is another run
    assert retrieval.summary(lines + [_line("keras-torch", 1, [0.5, 0.5], variant="in-batch"),
                                      _line("peer", 1, [0.5, 0.5], mining="ours")])


def test_a_second_test_set_for_one_train_set_is_refused():
    # Grouped and paired by train set, its lines would be averaged with the first
    # test set's and its keras line paired with the other set's peer line.
    lines = [_line("keras-torch", 1, [100.0, 80.0]), _line("peer", 1, [90.0, 70.0])]
    other = [dict(line, config=dict(line["config"], test="sts-b-zh-test"))
             for line in (_line("keras-torch", 1, [50.0, 50.0]), _line("peer", 1, [50.0, 50.0]))]
    with pytest.raises(SystemExit, match="lines 1 and 3 train on stsb-en-train but test on "
                                         "None and sts-b-zh-test"):
        retrieval.summary(lines + other)
    assert retrieval.summary(other)


def test_a_keras_run_recorded_again_under_the_other_peer_mining_is_refused():
    # Keras and zero-shot runs do not depend on how the peer mines: recorded again by
    # a --peer-mining ours invocation, they were averaged in twice (seeds "1,2,1,2").
    lines = [_line("keras-torch", 1, [10.0]), _line("peer", 1, [5.0]),
             _line("keras-torch", 1, [10.0], mining="ours")]
    with pytest.raises(SystemExit, match="lines 1 and 3 are the same run"):
        retrieval.check_once(lines)
    # The peer's two minings are two runs.
    retrieval.check_once(lines[:2] + [_line("peer", 1, [6.0], mining="ours",
                                            variant="on-keras-rows")])
