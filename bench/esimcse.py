"""Unsupervised SimCSE, SimCSE + word repetition and ESimCSE side by side (the ESimCSE paper's ablation).

From the packaged all-MiniLM-L6-v2, each run trains one epoch on the same random
subsample of a data set's train sentences (both columns, deduplicated, as one
sentence per line) with `keras-cosent train`, and reports dev and test Spearman
x 100 (and the starting encoder's). The three runs differ only in
`--word-repetition 0.32` and `--queue-size 160 --momentum 0.995` (ESimCSE's
BERT-base values). `--data` is STS-B English (`sts-benchmark`) or Chinese
(`sts-b-zh`); each seed draws its own subsample and seeds its own runs. With `--json`, the
runs and seeds already in that file are kept and not run again:

    .venv/bin/python bench/esimcse.py --data sts-benchmark --sentences 2000 \
        --seeds 1,2,3 --backend torch --json bench/results/esimcse-en.json
    .venv/bin/python bench/esimcse.py --data sts-b-zh --sentences 2000 \
        --seeds 1,2,3 --backend torch --json bench/results/esimcse-zh.json

The paper trains BERT-base from scratch of sentence-embedding training on a
million Wikipedia sentences; this starts from a model already trained for
sentence embeddings, on a few thousand sentences, so it tests whether the
ordering survives that starting point, not the paper's numbers.
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

from bench.common import REPO_ROOT  # noqa: E402
from bench.common import positive_int  # noqa: E402
from bench.common import seed_list  # noqa: E402
from bench.quality import DATA, split_paths  # noqa: E402

RUNS = {
    "simcse": ["--recipe", "simcse-unsup"],
    "simcse+repetition": ["--recipe", "simcse-unsup", "--word-repetition", "0.32"],
    "esimcse": ["--recipe", "esimcse-unsup"],
}


def write_sentences(path, data, count, seed):
    from keras_cosent.data import read_dataset

    fmt, paths = split_paths(data)
    train = read_dataset(paths["train"], fmt)
    sentences = sorted({s for column in train.columns for s in column})
    random.Random(seed).shuffle(sentences)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(s.replace("\n", " ") + "\n" for s in sentences[:count])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=sorted(DATA), default="sts-benchmark")
    parser.add_argument("--sentences", type=positive_int, default=2000)
    parser.add_argument("--seeds", default="42", type=seed_list, help="comma-separated seeds")
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--runs", default=",".join(RUNS))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    unknown = [name for name in args.runs.split(",") if name not in RUNS]
    if unknown:
        parser.error(f"unknown --runs {unknown}; choose from {list(RUNS)}")
    fmt, paths = split_paths(args.data)
    results = load_results(args.json, {"data": args.data, "sentences": args.sentences,
                                       "backend": args.backend})
    for seed in args.seeds:
        todo = [name for name in args.runs.split(",")
                if str(seed) not in results["runs"].get(name, {})]
        if not todo:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "sentences.txt")
            write_sentences(corpus, args.data, args.sentences, seed)
            for name in todo:
                output = os.path.join(tmp, name)
                command = [
                    sys.executable, "-m", "recipes", "--backend", args.backend, "train",
                    *RUNS[name], "--train", corpus, "--format", "text-lines",
                    "--dev", paths["dev"], "--test", paths["test"], "--eval-format", fmt,
                    "--seed", str(seed), "--output", output,
                ]
                start = time.time()
                subprocess.run(command, cwd=REPO_ROOT, check=True)
                with open(os.path.join(output, "results.json"), encoding="utf-8") as f:
                    scores = json.load(f)
                with open(os.path.join(output, "config.json"), encoding="utf-8") as f:
                    replay = json.load(f)["command"]
                row = {
                    "dev_before": scores["dev_before_training"]["spearman"],
                    "dev": scores["dev"]["spearman"], "test": scores["test"]["spearman"],
                    "seconds": round(time.time() - start, 1), "command": replay,
                }
                results["runs"].setdefault(name, {})[str(seed)] = row
                print(name, seed, row, flush=True)
                if args.json:
                    # Replaced whole: a run stopped mid-write keeps the last good file,
                    # whose runs are not run again.
                    with open(args.json + ".partial", "w", encoding="utf-8") as f:
                        json.dump(results, f, indent=2)
                        f.write("\n")
                    os.replace(args.json + ".partial", args.json)
    print(summary(results))


def load_results(path, settings):
    """The results already in `path` (a run and seed found there is not run again),
    else an empty record; the file's settings must be these, or it is another bench."""
    results = {**settings, "runs": {}}
    if not path or not os.path.exists(path):
        return results
    with open(path, encoding="utf-8") as f:
        found = json.load(f)
    differ = {key: (found.get(key), value) for key, value in settings.items()
              if found.get(key) != value}
    if differ:
        raise SystemExit(f"{path} holds results for other settings (file, asked): {differ}; "
                         f"name another --json")
    results["runs"] = found.get("runs", {})
    return results


def summary(results):
    """Markdown table: per run, mean (min-max) over seeds of dev and test Spearman x 100
    (results.json holds them x 100 already)."""
    lines = ["| run | seeds | dev | test |", "|---|---:|---:|---:|"]
    for name, by_seed in results["runs"].items():
        before = [r["dev_before"] for r in by_seed.values()]
        if name == next(iter(results["runs"])):
            lines.append(f"| starting model | | {sum(before) / len(before):.2f} | |")
        cells = []
        for key in ("dev", "test"):
            values = [r[key] for r in by_seed.values()]
            cells.append(f"{sum(values) / len(values):.2f} "
                         f"({min(values):.2f}-{max(values):.2f})")
        lines.append(f"| {name} | {len(by_seed)} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
