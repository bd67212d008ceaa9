"""The table of bench/precision_speed.py; no model is loaded."""

from bench.precision_speed import table


def test_table_gives_each_backends_seconds_and_the_bfloat16_ratio():
    lines = [{"backend": "torch", "policy": "float32", "forward_seconds": 2.0},
             {"backend": "torch", "policy": "mixed_bfloat16", "forward_seconds": 44.0},
             {"backend": "jax", "policy": "float32", "forward_seconds": 1.6}]
    rows = table(lines).splitlines()
    assert len(rows) == 4
    assert rows[2] == "| torch | 2.000 | 44.000 | 22.00x |"
    assert rows[3] == "| jax | 1.600 | - | - |"


def test_table_adds_training_steps_when_they_were_timed():
    lines = [{"backend": "jax", "policy": "float32", "forward_seconds": 0.5,
              "train_step_seconds": 0.08},
             {"backend": "jax", "policy": "mixed_bfloat16", "forward_seconds": 0.25,
              "train_step_seconds": 0.05}]
    rows = table(lines).splitlines()
    assert rows[2] == "| jax | 0.500 | 0.250 | 0.50x |"
    assert rows[3] == ""
    assert rows[4].startswith("| backend, training step |")
    assert rows[6] == "| jax | 0.080 | 0.050 | 0.62x |"


def test_table_divides_each_stack_by_the_peer_under_the_same_policy():
    lines = [{"backend": "peer", "policy": "float32", "train_step_seconds": 0.04,
              "forward_seconds": 0.01},
             {"backend": "peer", "policy": "mixed_bfloat16", "train_step_seconds": 0.02,
              "forward_seconds": 0.004},
             {"backend": "jax", "policy": "float32", "train_step_seconds": 0.02,
              "forward_seconds": 0.08},
             {"backend": "torch", "policy": "mixed_bfloat16", "train_step_seconds": 0.05,
              "forward_seconds": 0.03}]
    rows = table(lines).splitlines()
    assert rows[0].endswith("| float32 / peer | bfloat16 / peer |")
    assert rows[2] == "| peer | 0.010 | 0.004 | 0.40x | 1.00x | 1.00x |"
    assert rows[3] == "| jax | 0.080 | - | - | 8.00x | - |"
    assert rows[4] == "| torch | - | 0.030 | - | - | 7.50x |"
    assert rows[8] == "| peer | 0.040 | 0.020 | 0.50x | 1.00x | 1.00x |"
    assert rows[9] == "| jax | 0.020 | - | - | 0.50x | - |"
    assert rows[10] == "| torch | - | 0.050 | - | - | 2.50x |"


def test_a_failed_cell_leaves_the_results_file_as_it_was(tmp_path, monkeypatch):
    import json
    import subprocess
    import sys
    import types

    import pytest

    from bench import precision_speed

    out = tmp_path / "precision.jsonl"
    out.write_text('{"earlier": 1}\n')
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        if len(calls) == 1:  # the float32 cell runs, the bfloat16 one fails
            line = {"backend": "torch", "policy": "float32", "forward_seconds": 0.1}
            return types.SimpleNamespace(returncode=0, stdout=json.dumps(line) + "\n", stderr="")
        return types.SimpleNamespace(returncode=1, stdout="", stderr="boom")

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(sys, "argv", ["precision-speed", "--backends", "torch", "--out", str(out)])
    with pytest.raises(SystemExit, match="torch mixed_bfloat16 failed"):
        precision_speed.main()
    assert out.read_text() == '{"earlier": 1}\n'
    partial = (tmp_path / "precision.jsonl.partial").read_text().splitlines()
    assert json.loads(partial[0]) == {"earlier": 1}
    assert json.loads(partial[1])["policy"] == "float32"
