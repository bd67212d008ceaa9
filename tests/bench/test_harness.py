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
