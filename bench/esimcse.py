"""Unsupervised SimCSE, SimCSE + word repetition and ESimCSE side by side (the ESimCSE paper's ablation).

From the packaged all-MiniLM-L6-v2, each run trains one epoch on the same random
subsample of the STS-B English train sentences (both columns, deduplicated, as
one sentence per line) with `keras-cosent train`, and reports dev and test
Spearman x 100 (and the starting encoder's). The three runs differ only in
`--word-repetition 0.32` and `--queue-size 160 --momentum 0.995`:

    .venv/bin/python bench/esimcse.py --sentences 2000 --seed 42 --backend torch \
        --json bench/results/esimcse.json

One seed on a subsample is a smoke comparison, not the paper's result.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import REPO_ROOT, shared_data_dir  # noqa: E402

RUNS = {
    "simcse": ["--recipe", "simcse-unsup"],
    "simcse+repetition": ["--recipe", "simcse-unsup", "--word-repetition", "0.32"],
    "esimcse": ["--recipe", "esimcse-unsup"],
}


def write_sentences(path, count, seed):
    from keras_cosent.data import read_dataset

    train = read_dataset(str(shared_data_dir() / "stsbenchmark/sts-train.csv"), "sts-benchmark")
    sentences = sorted({s for column in train.columns for s in column})
    random.Random(seed).shuffle(sentences)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(s.replace("\n", " ") + "\n" for s in sentences[:count])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--runs", default=",".join(RUNS))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    data = shared_data_dir() / "stsbenchmark"
    results = {"sentences": args.sentences, "seed": args.seed, "backend": args.backend,
               "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "sentences.txt")
        write_sentences(corpus, args.sentences, args.seed)
        for name in args.runs.split(","):
            output = os.path.join(tmp, name)
            command = [
                sys.executable, "-m", "recipes", "--backend", args.backend, "train",
                *RUNS[name], "--train", corpus, "--format", "text-lines",
                "--dev", str(data / "sts-dev.csv"), "--test", str(data / "sts-test.csv"),
                "--eval-format", "sts-benchmark", "--seed", str(args.seed), "--output", output,
            ]
            start = time.time()
            subprocess.run(command, cwd=REPO_ROOT, check=True)
            with open(os.path.join(output, "results.json"), encoding="utf-8") as f:
                scores = json.load(f)
            with open(os.path.join(output, "config.json"), encoding="utf-8") as f:
                replay = json.load(f)["command"]
            results["runs"][name] = {
                "dev_before": scores["dev_before_training"]["spearman"],
                "dev": scores["dev"]["spearman"], "test": scores["test"]["spearman"],
                "seconds": round(time.time() - start, 1), "command": replay,
            }
            print(name, results["runs"][name], flush=True)
            if args.json:
                with open(args.json, "w", encoding="utf-8") as f:
                    json.dump(results, f, indent=2)
                    f.write("\n")


if __name__ == "__main__":
    main()
