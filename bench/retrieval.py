"""Retrieval benchmark: `train --recipe retrieval-infonce` next to sentence-transformers.

In one invocation, from the packaged all-MiniLM-L6-v2: the zero-shot model
(`keras-cosent evaluate --task retrieval`), `keras-cosent train --recipe
retrieval-infonce` on a BEIR train split (mining with the starting encoder,
InfoNCE with in-batch and mined negatives, dev nDCG@10 per epoch, best kept),
and the peer, bench/peer_retrieval.py (sentence-transformers'
MultipleNegativesRankingLoss on the same mined rows, same batch size,
learning rate, epochs and warm-up). All are scored on the test split by
keras-cosent's retrieval code (nDCG@10, MRR@10, Recall@10, MAP@100, x 100).
Appends one JSON line per stack to `--out` (the harness's schema: suite
"retrieval", figures, config, machine, versions, git commit) and prints a table.

    python -m bench retrieval --epochs 1 --batch-size 32 --out bench/results/retrieval.jsonl
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import REPO_ROOT, shared_data_dir  # noqa: E402
from bench import harness  # noqa: E402

FIGURES = ("ndcg@10", "mrr@10", "recall@10", "map@100")


def run(cmd, log):
    """Runs `cmd` from the repository root; returns (stdout, wall seconds)."""
    print(f"[{time.strftime('%H:%M:%S')}] {' '.join(map(str, cmd))}", file=sys.stderr, flush=True)
    log.write(f"\n### {' '.join(map(str, cmd))}\n")
    log.flush()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    start = time.time()
    proc = subprocess.run([str(c) for c in cmd], cwd=REPO_ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=log, text=True)
    seconds = time.time() - start
    log.write(proc.stdout)
    log.flush()
    if proc.returncode != 0:
        raise SystemExit(f"failed with exit code {proc.returncode}; see {log.name}")
    return proc.stdout, seconds


def evaluate(model, folder, split, backend, out_json, log):
    run([sys.executable, "-m", "recipes", "evaluate", "--backend", backend, model, folder,
         "--task", "retrieval", "--split", split, "--max-length", "64", "--json", out_json], log)
    with open(out_json, encoding="utf-8") as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser(prog="python -m bench retrieval",
                                description=__doc__.splitlines()[0])
    p.add_argument("--train", default="stsb-en-train", help="folder under <shared>/retrieval")
    p.add_argument("--dev", default="stsb-en-dev")
    p.add_argument("--test", default="stsb-en-test")
    p.add_argument("--backend", default="torch")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--warmup", type=float, default=0.1)
    p.add_argument("--runs", default="zero-shot,keras,peer",
                   help="comma-separated: zero-shot, keras, peer (peer needs keras' mined rows)")
    p.add_argument("--runs-dir", default=None, help="train outputs (default: a temporary folder)")
    p.add_argument("--out", required=True, help="JSON lines to append to")
    args = p.parse_args()

    import pathlib

    root = shared_data_dir() / "retrieval"
    folders = {s: root / getattr(args, s) for s in ("train", "dev", "test")}
    runs_dir = pathlib.Path(args.runs_dir or tempfile.mkdtemp(prefix="keras-cosent-retrieval-"))
    runs_dir.mkdir(parents=True, exist_ok=True)
    output = runs_dir / f"{args.train}-{args.backend}-e{args.epochs}-b{args.batch_size}"
    config = {"train": args.train, "dev": args.dev, "test": args.test, "epochs": args.epochs,
              "batch_size": args.batch_size, "lr": args.lr, "warmup": args.warmup,
              "max_length": 64, "recipe": "retrieval-infonce", "model": "all-MiniLM-L6-v2"}
    common = {"schema": harness.SCHEMA, "suite": "retrieval", "round": 1, "toggles": {},
              "pieces": {}, "config": config, "machine": harness.machine(),
              "versions": harness.versions(), "git": harness.git_state()}
    lines = []

    def record(stack, figures, **extra):
        line = dict(common, stack=stack, figures=figures, **extra,
                    load_average_after=[round(x, 2) for x in os.getloadavg()],
                    timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat())
        lines.append(line)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps(line["figures"]), file=sys.stderr, flush=True)

    runs = args.runs.split(",")
    with open(runs_dir / "retrieval.log", "a", encoding="utf-8") as log:
        if "zero-shot" in runs:
            result = evaluate("all-MiniLM-L6-v2", folders["test"], "test", args.backend,
                              runs_dir / "zero-shot.json", log)
            record("zero-shot", {k: result[k] for k in FIGURES})
        if "keras" in runs:
            cmd = [sys.executable, "-m", "recipes", "train", "--backend", args.backend,
                   "--recipe", "retrieval-infonce", "--train-retrieval", folders["train"],
                   "--dev-retrieval", folders["dev"], "--epochs", args.epochs,
                   "--batch-size", args.batch_size, "--lr", args.lr, "--warmup", args.warmup,
                   "--output", output]
            _, seconds = run(cmd, log)
            result = evaluate(output, folders["test"], "test", args.backend,
                              runs_dir / "keras.json", log)
            with open(output / "config.json", encoding="utf-8") as f:
                run_config = json.load(f)
            record(f"keras-{args.backend}", {**{k: result[k] for k in FIGURES},
                                             "wall_seconds": round(seconds, 1)},
                   command=run_config["command"])
        if "peer" in runs:
            with open(output / "config.json", encoding="utf-8") as f:
                negatives = json.load(f)["config"]["mine_negatives"]
            cmd = [sys.executable, REPO_ROOT / "bench" / "peer_retrieval.py",
                   "--mined", output / "mined.jsonl", "--negatives", negatives,
                   "--test", folders["test"], "--epochs", args.epochs,
                   "--batch-size", args.batch_size, "--lr", args.lr, "--warmup", args.warmup,
                   "--zero-shot"]
            stdout, seconds = run(cmd, log)
            result = json.loads(stdout.strip().splitlines()[-1])
            record("peer-zero-shot", result["zero_shot"])
            record("peer", {**result["test"], "wall_seconds": round(seconds, 1),
                            "train_seconds": result["train_seconds"]},
                   command=" ".join(map(str, cmd)))
    print("| model | nDCG@10 | MRR@10 | Recall@10 | MAP@100 | wall s |")
    print("|---|---:|---:|---:|---:|---:|")
    for line in lines:
        f = line["figures"]
        wall = f"{f['wall_seconds']:.0f}" if "wall_seconds" in f else ""
        print(f"| {line['stack']} | " + " | ".join(f"{f[k]:.2f}" for k in FIGURES)
              + f" | {wall} |")


if __name__ == "__main__":
    main()
