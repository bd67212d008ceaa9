"""The benchmarks refuse bad arguments before any run, naming them.

A typo found only when its turn came cost the runs before it (hours for the
retrieval and quality suites), left a line for a run that never happened, or
ended in a traceback; a result file of another benchmark gave a KeyError.
"""

import json
import subprocess
import sys

import pytest

from tests.backends import once_in

pytestmark = once_in("torch", "the benchmarks' argument checks (subprocesses, no backend)")


def _bench(tmp_path, *args):
    # A short timeout: a check that regressed would start the real run.
    from bench.common import REPO_ROOT
    from bench.common import shared_data_dir

    env = {"PATH": "/usr/bin:/bin", "KERAS_COSENT_SHARED_DATA": str(shared_data_dir()),
           "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=env, text=True,
                          capture_output=True, timeout=60)


@pytest.mark.parametrize("args, says", [
    (["-m", "bench", "retrieval", "--runs", "zero-shot,peers"], "unknown --runs ['peers']"),
    (["-m", "bench", "retrieval", "--train", "nosuch"], "--train nosuch: no folder"),
    (["-m", "bench", "retrieval", "--seeds", "1,x"],
     "argument --seeds: expected comma-separated integers, got '1,x'"),
    (["-m", "bench", "retrieval", "--peer-mining", "ours", "--runs", "peer"],
     "--peer-mining ours trains the peer on the keras 'mined' variant's rows"),
    (["-m", "bench", "losses", "--seeds", "x"], "argument --seeds: expected comma-separated"),
    # A run listed twice appended two lines of it, which the reports then refused
    # along with the file's earlier runs.
    (["-m", "bench", "retrieval", "--seeds", "1,1"], "argument --seeds: 1 is given twice"),
    (["-m", "bench", "retrieval", "--variants", "mined,mined"], "--variants: mined is given twice"),
    (["-m", "bench", "losses", "--stacks", "peer,peer"], "--stacks: peer is given twice"),
    (["-m", "bench", "quality", "--runs", "jax,foo"],
     "--runs 'foo': expected peer, a backend (tensorflow, jax, torch) or backend:loss"),
    (["bench/esimcse.py", "--runs", "simcse,foo"], "unknown --runs ['foo']"),
    # Each of these failed in every worker process, one row each, and exited 0.
    (["-m", "bench", "tool", "gradcache", "--sizes", "16,64"],
     "--mini-batch-size 32: expected 1 to the smallest of --sizes (16)"),
    (["-m", "bench", "tool", "gradcache", "--sizes", "0,64"],
     "argument --sizes: expected comma-separated positive integers, got '0,64'"),
    (["-m", "bench", "tool", "gradcache", "--steps", "0"],
     "argument --steps: expected a positive integer, got '0'"),
    # These failed only when their run started, after the runs before it.
    (["-m", "bench", "retrieval", "--batch-size", "0"],
     "argument --batch-size: expected a positive integer, got '0'"),
    (["-m", "bench", "retrieval", "--dev", "slice:x"],
     "--dev slice:x: expected slice:N, N a positive number of train queries"),
    (["-m", "bench", "retrieval", "--warmup", "1"],
     "argument --warmup: expected a fraction in [0, 1), got '1'"),
    (["-m", "bench", "losses", "--lr", "nan"],
     "argument --lr: expected a positive number, got 'nan'"),
    (["-m", "bench", "losses", "--weight-decay=-0.1"],
     "argument --weight-decay: expected a number >= 0, got '-0.1'"),
    (["-m", "bench", "quality", "--epochs", "0"],
     "argument --epochs: expected a positive integer, got '0'"),
    (["-m", "bench", "tool", "ranking-scaling", "--sizes", "64,x"],
     "argument --sizes: expected comma-separated positive integers, got '64,x'"),
    (["-m", "bench", "tool", "search-speed", "--corpus-sizes", "1000,0"],
     "argument --corpus-sizes: expected comma-separated positive integers, got '1000,0'"),
])
def test_bad_arguments_are_refused_before_any_run(tmp_path, args, says):
    out = tmp_path / "out.jsonl"
    result = _bench(tmp_path, *args, "--json" if "quality" in args or "bench/esimcse.py" in args
                    else "--out", out)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr.splitlines()[-1]
    assert not list(tmp_path.glob("out.json*"))  # nothing written
    assert not list(tmp_path.glob("keras-cosent-*"))  # no run folder made


def test_train_steps_refuses_an_unknown_off_piece_before_the_backend_starts(tmp_path):
    # It raised a traceback once the backend had started (probe).
    result = _bench(tmp_path, "-m", "bench", "tool", "train-steps", "--stack", "jax",
                    "--off", "glibc_pool,glibc_poool")
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1].endswith(
        "--off 'glibc_pool,glibc_poool': unknown ['glibc_poool']; expected names from "
        "['tf_bfc_allocator', 'glibc_pool', 'glibc_mmap_threshold', 'tf_threefry_dropout', "
        "'tf_data_autotune_off']")


def test_a_result_file_of_another_benchmark_is_named(tmp_path):
    other = tmp_path / "gradcache.jsonl"
    other.write_text(json.dumps({"tool": "gradcache", "figures": {}}) + "\n")
    for args, suites in ((["report"], "train-speed, encode-speed, memory"),
                         (["retrieval", "--summarize"], "retrieval"),
                         (["losses", "--summarize"], "losses")):
        result = _bench(tmp_path, "-m", "bench", *args, other)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines()[-1] == (
            f"{other}:1: not a result of {suites} (its suite: None)")
    result = _bench(tmp_path, "-m", "bench", "report", tmp_path / "missing.jsonl")
    assert result.stderr.strip() == f"{tmp_path / 'missing.jsonl'}: No such file or directory"


def test_report_points_at_the_summary_of_a_suite_that_has_its_own(tmp_path):
    results = tmp_path / "retrieval.jsonl"
    results.write_text(json.dumps({"suite": "retrieval", "figures": {}}) + "\n")
    result = _bench(tmp_path, "-m", "bench", "report", results)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"{results}:1: not a result of train-speed, encode-speed, memory (its suite: "
        f"'retrieval'); read it with python -m bench retrieval --summarize {results}")


def test_tool_help_lists_every_tool_with_what_it_measures(tmp_path):
    # `tool --help` was refused as an unknown tool name.
    from bench.__main__ import TOOLS

    result = _bench(tmp_path, "-m", "bench", "tool", "--help")
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0]: line for line in result.stdout.splitlines()[2:] if line.strip()}
    assert sorted(listed) == sorted(TOOLS)
    assert "GradCache" in listed["gradcache"]
    bare = _bench(tmp_path, "-m", "bench", "tool")
    assert bare.returncode == 2 and bare.stderr.strip() == result.stdout.strip()
    # Each tool's usage names the command that runs it (it read "usage: search_speed.py").
    tool = _bench(tmp_path, "-m", "bench", "tool", "search-speed", "--help")
    assert tool.stdout.startswith("usage: python -m bench tool search-speed "), tool.stdout


def test_gradcache_exits_non_zero_when_a_run_failed(tmp_path):
    # A worker that fails (here: no STS-B where the shared data should be) leaves
    # its row, which says how, and the benchmark no longer exits 0.
    from bench.common import REPO_ROOT

    out = tmp_path / "out.jsonl"
    env = {"PATH": "/usr/bin:/bin", "KERAS_COSENT_SHARED_DATA": str(tmp_path / "nowhere"),
           "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "bench", "tool", "gradcache", "--sizes", "8", "--max-uncached",
         "0", "--mini-batch-size", "4", "--steps", "1", "--out", str(out)],
        cwd=REPO_ROOT, env=env, text=True, capture_output=True, timeout=300)
    assert result.returncode == 1, result.stderr
    assert "1 of 1 runs failed" in result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["rows"], r["mini_batch_size"], r["error"][:6]) for r in rows] == [(8, 4, "exit 1")]
