"""The benchmark harness: its report's arithmetic against hand-computed ratios, and a
smoke run (tiny sizes, the current backend) whose JSON lines carry every key."""

import json
import math
import statistics
import subprocess
import sys

import keras
import pytest

from bench import harness
from tests.backends import once_in


def _line(stack, rnd, train, encode):
    return {"suite": "train-speed", "stack": stack, "round": rnd,
            "figures": {"train_pairs_per_s": train, "encode_sentences_per_s": encode}}


def test_report_ratios_per_round(tmp_path, capsys):
    lines = [_line("peer", 1, 50.0, 400.0), _line("jax", 1, 60.0, 300.0),
             _line("peer", 2, 40.0, 500.0), _line("jax", 2, 52.0, 600.0),
             _line("peer", 3, 80.0, 200.0), _line("jax", 3, 72.0, 250.0)]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(l) + "\n" for l in lines))
    rows = {(r["stack"], r["figure"]): r for r in harness.report(str(path))}
    jax_train = rows[("jax", "train_pairs_per_s")]
    # by hand: 60/50 = 1.2, 52/40 = 1.3, 72/80 = 0.9
    assert jax_train["ratios"] == pytest.approx([1.2, 1.3, 0.9])
    assert jax_train["ratio_median"] == pytest.approx(1.2)
    assert (jax_train["ratio_min"], jax_train["ratio_max"]) == pytest.approx((0.9, 1.3))
    assert jax_train["median"] == pytest.approx(60.0)
    jax_enc = rows[("jax", "encode_sentences_per_s")]
    assert jax_enc["ratio_median"] == pytest.approx(statistics.median([0.75, 1.2, 1.25]))
    assert rows[("peer", "train_pairs_per_s")]["ratios"] == pytest.approx([1.0, 1.0, 1.0])
    assert "1.20" in capsys.readouterr().out


def test_runs_appended_to_one_file_are_reported_apart(tmp_path, capsys):
    # Two invocations appending to one file (as the page's commands do): each run's
    # ratios use its own peer, and the second run's one round is not counted as a
    # third round of the first.
    first = [dict(_line("peer", 1, 50.0, 400.0), run="a"), dict(_line("jax", 1, 60.0, 300.0), run="a"),
             dict(_line("peer", 2, 40.0, 500.0), run="a"), dict(_line("jax", 2, 52.0, 600.0), run="a")]
    second = [dict(_line("peer", 1, 100.0, 400.0), run="b")]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(l) + "\n" for l in first + second))
    rows = harness.report(str(path))
    jax = [r for r in rows if r["stack"] == "jax" and r["figure"] == "train_pairs_per_s"]
    assert len(jax) == 1 and jax[0]["run"] == "a" and jax[0]["rounds"] == 2
    assert jax[0]["ratios"] == pytest.approx([1.2, 1.3])
    peers = [r for r in rows if r["stack"] == "peer" and r["figure"] == "train_pairs_per_s"]
    assert [(r["run"], r["rounds"], r["median"]) for r in peers] == [("a", 2, 45.0), ("b", 1, 100.0)]
    assert capsys.readouterr().out.count("run at commit") == 2
    only = harness.report(str(path), run="b")
    assert {r["run"] for r in only} == {"b"}


def test_lines_without_run_ids_are_told_apart_by_commit(tmp_path):
    lines = [dict(_line("peer", 1, 50.0, 400.0), git={"commit": "x", "dirty": False}),
             dict(_line("peer", 1, 70.0, 400.0), git={"commit": "y", "dirty": False})]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(l) + "\n" for l in lines))
    rows = [r for r in harness.report(str(path)) if r["figure"] == "train_pairs_per_s"]
    assert [(r["commit"], r["median"]) for r in rows] == [("x", 50.0), ("y", 70.0)]


def test_a_round_written_twice_in_one_run_is_refused(tmp_path):
    lines = [dict(_line("peer", 1, 50.0, 400.0), run="a"), dict(_line("peer", 1, 60.0, 400.0), run="a")]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(l) + "\n" for l in lines))
    with pytest.raises(SystemExit, match="peer round 1 appears twice"):
        harness.report(str(path))


def test_results_reach_their_file_only_when_complete(tmp_path):
    path = tmp_path / "results" / "r.jsonl"
    path.parent.mkdir()
    path.write_text("earlier\n")
    harness.write_results(str(path), "first size\n", complete=False)
    # a run stopped here leaves the earlier file as it was, its progress beside it
    assert path.read_text() == "earlier\n"
    assert (tmp_path / "results" / "r.jsonl.partial").read_text() == "first size\n"
    harness.write_results(str(path), "first size\nsecond size\n", complete=True)
    assert path.read_text() == "first size\nsecond size\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["r.jsonl"]


# A child process that loads MiniLM and trains 8 pairs costs 30-60 s: on demand
# (`-m slow`), once, in the PyTorch process (its stack is the child's own).
@pytest.mark.slow
@once_in("torch", "the harness smoke run (its stack is the child's own)")
def test_smoke_run_writes_the_schema(tmp_path):
    out = tmp_path / "smoke.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "train-speed", "--stacks", keras.backend.backend(),
         "--rounds", "1", "--size", "tiny", "--out", str(out)],
        cwd=str(harness.REPO_ROOT), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = harness.read_lines(str(out))
    assert set(harness.KEYS) <= set(line)
    assert line["stack"] == keras.backend.backend() and line["round"] == 1
    assert set(harness.PACKAGES) | {"python"} <= set(line["versions"])
    assert {"cpu", "cores", "memory_gib"} <= set(line["machine"])
    assert {"commit", "dirty"} <= set(line["git"])
    for key in ("train_pairs_per_s", "encode_sentences_per_s", "peak_rss_mib", "warmup_s"):
        assert math.isfinite(line["figures"][key]) and line["figures"][key] > 0
    assert line["figures"]["train_pairs_per_s"] == pytest.approx(8 / line["figures"]["train_s"])


def test_toggle_names_are_the_runtime_pieces():
    from bench import toggles
    from keras_cosent import runtime

    assert set(toggles.NAMES) == set(runtime.PIECES)
    assert toggles.parse(["glibc_pool=off", "tf_threefry_dropout=on"]) == {
        "glibc_pool": False, "tf_threefry_dropout": True}
    with pytest.raises(SystemExit, match="glibc_pooling"):
        toggles.parse(["glibc_pooling=off"])
