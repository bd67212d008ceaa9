"""Side-by-side quality benchmark: STS fine-tuning with keras-cosent vs sentence-transformers.

Runs, one after the other in this invocation, the peer script bench/peer_sts.py
(sentence-transformers' CoSENTLoss) and `keras-cosent train --recipe sts-cosent`
(the command users run) on each backend and loss asked for, all from the packaged
all-MiniLM-L6-v2 with the same settings, and prints dev and test Spearman x 100,
the wall time of each whole process and its ratio to the peer's. `--json` is
written once every run is done; until then each finished run is rewritten to
JSON.partial, so an interrupted benchmark keeps what finished.

    .venv/bin/python -m bench quality --data sts-benchmark \
        --runs peer,tensorflow,jax,torch --json bench/results/quality-en.json
    .venv/bin/python -m bench quality --data sts-b-zh \
        --runs peer,jax,jax:sbert-softmax,jax:cosine-mse --json bench/results/quality-zh.json

A run is `peer`, a backend (CoSENT), or `backend:loss` with a `train --loss`.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import harness  # noqa: E402
from bench.common import REPO_ROOT, shared_data_dir  # noqa: E402
from bench.common import positive_int  # noqa: E402

DATA = {
    "sts-benchmark": ("sts-benchmark", {"train": "stsbenchmark/sts-train.csv",
                                        "dev": "stsbenchmark/sts-dev.csv",
                                        "test": "stsbenchmark/sts-test.csv"}),
    "sts-b-zh": ("pair-tsv", {"train": "sts-b-zh/STS-B.train.data",
                              "dev": "sts-b-zh/STS-B.valid.data",
                              "test": "sts-b-zh/STS-B.test.data"}),
}


def split_paths(data):
    fmt, files = DATA[data]
    root = shared_data_dir()
    return fmt, {k: str(root / v) for k, v in files.items()}


def load_splits(data):
    """{split: (sentences1, sentences2, scores)} read with the project's reader."""
    from keras_cosent.data import read_dataset

    fmt, paths = split_paths(data)
    out = {}
    for split, path in paths.items():
        ds = read_dataset(path, fmt)
        out[split] = (list(ds.columns[0]), list(ds.columns[1]), [float(v) for v in ds.labels])
    return out


def seed_args(seed):
    """`--seed N` when a seed is asked for; otherwise each side keeps its own default."""
    return [] if seed is None else ["--seed", str(seed)]


def peer_command(data, epochs, seed=None):
    return [sys.executable, str(REPO_ROOT / "bench" / "peer_sts.py"), "--data", data,
            "--epochs", str(epochs)] + seed_args(seed)


def keras_command(data, epochs, backend, loss, output, seed=None):
    fmt, paths = split_paths(data)
    return [sys.executable, "-m", "recipes", "train", "--backend", backend,
            "--recipe", "sts-cosent", "--loss", loss, "--format", fmt,
            "--train", paths["train"], "--dev", paths["dev"], "--test", paths["test"],
            "--epochs", str(epochs), "--output", str(output)] + seed_args(seed)


def bad_run(spec):
    """Why `spec` (peer, a backend, or backend:loss) is no run, or None."""
    if spec == "peer":
        return None
    import click

    from recipes.context import BACKENDS
    from recipes.options import OBJECTIVE

    backend, _, loss = spec.partition(":")
    if backend not in BACKENDS:
        return f"expected peer, a backend ({', '.join(BACKENDS)}) or backend:loss"
    if loss:
        try:
            OBJECTIVE.convert(loss, None, None)
        except click.BadParameter as error:
            return error.format_message()
    return None


def run_one(spec, data, epochs, runs_dir, log, seed=None):
    """Runs one stack in a subprocess; returns its result row."""
    if spec == "peer":
        stack, loss = "sentence-transformers", "cosent"
        output = None
        cmd = peer_command(data, epochs, seed)
    else:
        backend, _, loss = spec.partition(":")
        loss = loss or "cosent"
        stack = f"keras-{backend}"
        suffix = "" if seed is None else f"-seed{seed}"
        # Every option the command varies is in the name: `train` refuses a folder
        # that holds a run of other options.
        output = runs_dir / f"{data}-{backend}-{loss}-e{epochs}{suffix}"
        cmd = keras_command(data, epochs, backend, loss, output, seed)
    # `train` reuses a finished run of the same options in place: its figures are
    # an earlier commit's and its wall time is the reuse's.
    reused = output is not None and (output / "results.json").is_file()
    print(f"[{time.strftime('%H:%M:%S')}] {spec}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    log.write(f"\n### {spec}: {' '.join(cmd)}\n")
    log.flush()
    start = time.time()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    seconds = time.time() - start
    log.write(proc.stdout)
    log.flush()
    if proc.returncode != 0:
        raise SystemExit(f"{spec} failed with exit code {proc.returncode}; see {log.name}")
    if output is None:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        dev, test = result["dev_spearman"], result["test_spearman"]
    else:
        with open(output / "results.json", encoding="utf-8") as f:
            result = json.load(f)
        dev, test = result["dev"]["spearman"], result["test"]["spearman"]
    return {"run": spec, "stack": stack, "loss": loss, "data": data, "epochs": epochs,
            "seed": seed, "dev_spearman": round(dev, 2), "test_spearman": round(test, 2),
            "wall_seconds": round(seconds, 1), "reused": reused, "command": " ".join(cmd)}


def table(rows):
    peer = next((r for r in rows if r["run"] == "peer"), None)
    lines = ["| run | loss | dev Spearman | test Spearman | test - peer | wall s | wall / peer |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        gap = f"{r['test_spearman'] - peer['test_spearman']:+.2f}" if peer else "-"
        ratio = ("reused" if r.get("reused") else "-" if not peer
                 else f"{r['wall_seconds'] / peer['wall_seconds']:.2f}")
        lines.append(f"| {r['stack']} | {r['loss']} | {r['dev_spearman']:.2f} | "
                     f"{r['test_spearman']:.2f} | {gap} | {r['wall_seconds']:.0f} | {ratio} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(prog="python -m bench quality", description=__doc__.splitlines()[0])
    p.add_argument("--data", choices=sorted(DATA), default="sts-benchmark",
                   help="default: sts-benchmark")
    p.add_argument("--epochs", type=positive_int, default=4, help="default: 4")
    p.add_argument("--runs", default="peer,tensorflow,jax,torch",
                   help="comma-separated: peer, a backend, or backend:loss (default: "
                   "peer,tensorflow,jax,torch)")
    p.add_argument("--json", default=None,
                   help="write the rows here once every run is done (after each run, to "
                   "JSON.partial)")
    p.add_argument("--runs-dir", default=None, help="train outputs (default: a temporary folder)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed for every run (default: peer_sts.py's 0, keras-cosent train's 42)")
    args = p.parse_args()
    specs = [spec.strip() for spec in args.runs.split(",")]
    for spec in specs:
        # Checked before the first run, which takes minutes to hours.
        problem = bad_run(spec)
        if problem:
            p.error(f"--runs {spec!r}: {problem}")

    import pathlib

    runs_dir = pathlib.Path(args.runs_dir or tempfile.mkdtemp(prefix="keras-cosent-quality-"))
    runs_dir.mkdir(parents=True, exist_ok=True)
    log_path = runs_dir / f"quality-{args.data}.log"
    report = {"data": args.data, "epochs": args.epochs, "seed": args.seed, "argv": sys.argv,
              "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "rows": []}
    with open(log_path, "a", encoding="utf-8") as log:
        for spec in specs:
            row = run_one(spec, args.data, args.epochs, runs_dir, log, args.seed)
            row["load_average"] = [round(x, 2) for x in os.getloadavg()]
            report["rows"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            if args.json:
                harness.write_results(args.json, json.dumps(report, indent=2) + "\n",
                                      complete=len(report["rows"]) == len(specs))
    print(table(report["rows"]))


if __name__ == "__main__":
    main()
