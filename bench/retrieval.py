"""Retrieval benchmark: `train --recipe retrieval-infonce` next to sentence-transformers.

In one invocation, from the packaged all-MiniLM-L6-v2: the zero-shot model
(`keras-cosent evaluate --task retrieval`), `keras-cosent train --recipe
retrieval-infonce` on a BEIR train split (mining with the starting encoder,
InfoNCE with in-batch and mined negatives, dev nDCG@10 per epoch, best kept),
and the peer, bench/peer_retrieval.py (sentence-transformers'
MultipleNegativesRankingLoss, by default on rows its own `mine_hard_negatives`
mined with the recipe's mining settings, same batch size, learning rate, epochs
and warm-up). All are scored on the test split by keras-cosent's retrieval code
(nDCG@10, MRR@10, Recall@10, MAP@100, x 100). Appends one JSON line per stack,
seed and variant to `--out` (the harness's schema: suite "retrieval", figures,
config, machine, versions, git commit) and prints a table with the mean and
spread over seeds.

Variants of the keras run (`--variants`): `mined` (the recipe as it is),
`in-batch` (`--mine-negatives 0`: in-batch negatives only), `no-margin`
(`--mine-relative-margin off`: mined negatives without the false-negative
margin), `drop-short` (`--mine-fill none`: rows the margin leaves without a
negative are dropped, as the peer's mining does, instead of getting a random
one) and `symmetric` (`--symmetric`: each positive also picks its own query
among the batch's queries). `--dev slice:N` holds N train queries out as the
dev split (for sets such as OCNLI whose only other split is the one reported),
so that training never sees them.

`--transfer` also scores every model (zero-shot, keras, peer) on held-out sets
that no run trains or selects on: folders under `<shared>/retrieval` (their
split is the name's last part: `stsb-en-test`, `ocnli-zh-dev`) or a set built
here from labelled pairs by the rule that made those folders (`sts-b-zh-test`:
Chinese STS-B test, score >= 4 relevant; built under the runs folder, never in
the repository). The summary gives their figures as rows `<train> -> <set>`.

    python -m bench retrieval --epochs 1 --batch-size 32 --seeds 1,2,3 \
        --out bench/results/retrieval.jsonl
    python -m bench retrieval --train ocnli-zh-train --dev slice:300 --test ocnli-zh-dev \
        --test-split dev --seeds 1,2,3 --out bench/results/retrieval.jsonl
    python -m bench retrieval --summarize bench/results/retrieval.jsonl
"""

import argparse
import datetime
import json
import os
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import REPO_ROOT, repeated, seed_list, shared_data_dir  # noqa: E402
from bench.common import add_training_arguments, positive_int  # noqa: E402
from bench.common import run_logged as run  # noqa: E402
from bench import harness  # noqa: E402
# The figures kept per run: the columns of `keras-cosent evaluate`'s retrieval table.
from recipes.reporting import RETRIEVAL_COLUMNS as FIGURES  # noqa: E402


def evaluate(model, folder, split, backend, out_json, log):
    run([sys.executable, "-m", "recipes", "evaluate", "--backend", backend, model, folder,
         "--task", "retrieval", "--split", split, "--max-length", "64", "--json", out_json,
         "--overwrite", "--per-query"], log)
    with open(out_json, encoding="utf-8") as f:
        return json.load(f)


def carve_dev(train_folder, split, size, root, distractors=2500):
    """Splits a BEIR train folder into (train, dev) folders under `root` by
    `keras_cosent.data.hold_out_queries` (seed 0; the split `train
    --dev-retrieval-holdout` makes): `size` queries become dev, with their
    judged documents and `distractors` others (a corpus the size of OCNLI's dev
    split, cheap to score after every epoch); train drops the documents only dev
    queries judge. Lines are copied as they are (ids and texts unchanged), so
    that the peer reads the same folders."""
    from keras_cosent.data import hold_out_queries
    from keras_cosent.data import read_beir

    parts = hold_out_queries(read_beir(train_folder, split), size, seed=0,
                             distractors=distractors)

    def lines(path):
        with open(path, encoding="utf-8") as f:
            return [line for line in f if line.strip()]

    header, *judgements = lines(train_folder / "qrels" / f"{split}.tsv")
    by_query = {}
    for line in judgements:
        by_query.setdefault(line.split("\t", 1)[0], []).append(line)
    # Each source line with its id, read once for both folders.
    sources = {file: [(json.loads(line)["_id"], line) for line in lines(train_folder / file)]
               for file in ("queries.jsonl", "corpus.jsonl")}
    folders = {}
    for name, part in zip(("train", "dev"), parts):
        folder = root / f"{train_folder.name}-{name}-slice{size}"
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
        for file, keep in (("queries.jsonl", part.queries), ("corpus.jsonl", part.corpus)):
            with open(folder / file, "w", encoding="utf-8") as f:
                f.writelines(line for i, line in sources[file] if i in keep)
        with open(folder / "qrels" / f"{name}.tsv", "w", encoding="utf-8") as f:
            # Queries in sorted id order, as the figures in BENCHMARKS.md were run.
            f.write(header)
            f.writelines(line for q in sorted(part.qrels) for line in by_query[q])
        folders[name] = folder
    return folders


# Held-out sets built from labelled pairs: name -> (file under <shared>, its
# `keras_cosent.data.read_dataset` format, split).
BUILT = {"sts-b-zh-test": ("sts-b-zh/STS-B.test.data", "pair-tsv", "test")}


def pairs_to_beir(dataset, folder, split, threshold=4.0):
    """Writes a scored `PairDataset` as a BEIR folder, by the rule of
    `<shared>/retrieval/README.md`: queries are the distinct first sentences of
    pairs scoring `threshold` or more, in order of first appearance; the corpus
    is every distinct second sentence of the split, in order; a query's
    relevant documents (score 1) are its positive pairs' second sentences. A
    pair whose two sentences are the same text judges nothing (its document
    stays in the corpus): such a query would find itself. Returns `folder`."""
    docs, queries, qrels = {}, {}, {}
    for (first, second), score in zip(dataset.pairs, dataset.labels):
        docs.setdefault(second, f"d{len(docs)}")
        if score >= threshold and first != second:
            qid = queries.setdefault(first, f"q{len(queries)}")
            qrels.setdefault(qid, {})[docs[second]] = 1
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"_id": i, "title": "", "text": t}, ensure_ascii=False) + "\n"
                     for t, i in docs.items())
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"_id": i, "text": t}, ensure_ascii=False) + "\n"
                     for t, i in queries.items())
    with open(folder / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines(f"{q}\t{d}\t{s}\n" for q, judged in qrels.items() for d, s in judged.items())
    return folder


def transfer_sets(names, runs_dir):
    """name -> (folder, split) for `--transfer`: shared retrieval folders as they
    are, the `BUILT` sets written under `runs_dir`."""
    from keras_cosent.data import read_dataset

    root = shared_data_dir()
    sets = {}
    for name in names:
        if name in BUILT:
            path, format, split = BUILT[name]
            pairs = read_dataset(root / path, format)
            sets[name] = (pairs_to_beir(pairs, runs_dir / name, split), split)
        elif (root / "retrieval" / name).is_dir():
            sets[name] = (root / "retrieval" / name, name.rsplit("-", 1)[-1])
        else:
            raise SystemExit(f"--transfer: unknown set {name!r}: not a folder under "
                             f"{root / 'retrieval'} and not one of {sorted(BUILT)}")
    return sets


def with_transfer(lines):
    """Each line's `transfer` sets as lines of their own, trained on `<train> -> <set>`,
    so that the summary and the paired tables treat them as further test sets."""
    out = []
    for line in lines:
        for name, result in line.get("transfer", {}).items():
            config = dict(line["config"], train=f"{line['config']['train']} -> {name}")
            out.append({**{k: v for k, v in line.items() if k != "transfer"}, "config": config,
                        "figures": result["figures"],
                        "per_query_ndcg@10": result["per_query_ndcg@10"]})
    return out


VARIANTS = {"mined": [], "in-batch": ["--mine-negatives", 0],
            "no-margin": ["--mine-relative-margin", "off"], "drop-short": ["--mine-fill", "none"],
            "symmetric": ["--symmetric"]}


def summarize(lines):
    """Markdown table: per (train set, stack, variant), mean and spread over seeds."""
    import statistics

    groups = {}
    for line in lines:
        key = (line["config"]["train"], line["stack"], line.get("variant", ""),
               line["config"]["epochs"])
        groups.setdefault(key, []).append(line)
    out = ["| train | model | epochs | seeds | " + " | ".join(FIGURES) + " |",
           "|---|---|---:|---:|" + "---:|" * len(FIGURES)]
    for (train, stack, variant, epochs), group in groups.items():
        cells = []
        for figure in FIGURES:
            values = [g["figures"][figure] for g in group]
            mean = statistics.fmean(values)
            cells.append(f"{mean:.2f}" if len(values) == 1 else
                         f"{mean:.2f} ({min(values):.2f}-{max(values):.2f})")
        seeds = ",".join(str(g.get("seed", "")) for g in group)
        name = stack + (f" {variant}" if variant else "")
        if stack == "zero-shot":
            epochs = "-"
        out.append(f"| {train} | {name} | {epochs} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def paired(lines, against="peer", resamples=10000, seed=0):
    """Markdown table: nDCG@10 differences query by query, for each train set.

    `against="peer"`: each keras line against the peer line of the same train
    set, epochs, seed and peer mining. `against="mined"`: each keras variant
    (in-batch, no-margin, ...) against the recipe as it is (variant `mined`) of
    the same train set, epochs and seed. Lines need `per_query_ndcg@10`. Each
    query's difference is averaged over the paired seeds; the table gives the
    mean with a 95% bootstrap interval (queries resampled with replacement,
    seeded) and how many queries each side ranks better. With one relevant
    document per query, a document moving from rank 1 to rank 2 moves one
    query's nDCG@10 by 37 points, the mean of 309 queries by 0.12: the interval
    says how far apart two means must be before the split tells them apart.
    """
    import numpy as np

    key = "per_query_ndcg@10"

    def settings(g):
        return g["config"]["train"], g["config"]["epochs"], g.get("seed")

    if against == "peer":
        def is_base(g):
            return g["stack"] == "peer"

        def is_compared(g):
            return g["stack"].startswith("keras")

        def match(g):
            return (*settings(g), g["config"].get("peer_mining"))
        label = "keras - peer"
    else:
        def is_base(g):
            return g["stack"].startswith("keras") and g.get("variant") == against

        def is_compared(g):
            return g["stack"].startswith("keras") and g.get("variant") != against

        def match(g):
            return (*settings(g), g["stack"])
        label = f"variant - {against}"
    bases = {match(g): g for g in lines if is_base(g) and key in g}
    groups = {}
    for g in lines:
        if is_compared(g) and key in g and match(g) in bases:
            name = f"{g['stack']} {g.get('variant', '')}".strip()
            if against == "peer":
                name += f" ({g['config'].get('peer_mining')} mining)"
            group = (g["config"]["train"], name, g["config"]["epochs"])
            groups.setdefault(group, []).append((g[key], bases[match(g)][key], g["seed"]))
    out = [f"| train | run | epochs | seeds | queries | {label} nDCG@10 (95% bootstrap) | "
           "queries better / worse / equal |",
           "|---|---|---:|---:|---:|---:|---|"]
    for (train, name, epochs), pairs in groups.items():
        # Each group's resamples are seeded by the group itself, so that its
        # interval does not depend on which other lines the file holds.
        rng = np.random.default_rng([seed, zlib.crc32(f"{train}|{name}|{epochs}".encode())])
        queries = sorted(set.intersection(*(set(a) & set(b) for a, b, _ in pairs)))
        diff = np.mean([[a[q] - b[q] for q in queries] for a, b, _ in pairs], axis=0)
        means = np.concatenate([
            diff[rng.integers(0, len(diff), size=(min(1000, resamples - start), len(diff)))]
            .mean(axis=1) for start in range(0, resamples, 1000)])
        low, high = np.percentile(means, [2.5, 97.5])
        counts = (int((diff > 1e-9).sum()), int((diff < -1e-9).sum()),
                  int((np.abs(diff) <= 1e-9).sum()))
        seeds = ",".join(str(s) for _, _, s in pairs)
        out.append(f"| {train} | {name} | {epochs} | {seeds} | {len(queries)} | "
                   f"{diff.mean():+.2f} ({low:+.2f} to {high:+.2f}) | "
                   f"{counts[0]} / {counts[1]} / {counts[2]} |")
    return "\n".join(out) if len(out) > 2 else ""


def _commit(line):
    return ((line.get("git") or {}).get("commit") or "unknown")[:7]


def check_once(lines):
    """Refuses a file in which one run (train set, test set, stack, variant, epochs,
    seed, and for the peer its mining) appears twice, as when a command is rerun onto the same --out:
    its means and pairs would count the run twice."""
    seen, tests = {}, {}
    for number, line in enumerate(lines, 1):
        config = line["config"]
        # The tables group and pair lines by train set: a second test set would be
        # averaged with the first, and its lines paired with the first's.
        first = tests.setdefault(config["train"], (number, config.get("test")))
        if config.get("test") != first[1]:
            raise SystemExit(
                f"lines {first[0]} and {number} train on {config['train']} but test on "
                f"{first[1]} and {config.get('test')}; summarize each test set from a "
                "file of its own")
        # How the peer mined tells only its own lines apart (the variant names it
        # too): keras and zero-shot lines recorded again by a run with the other
        # --peer-mining are the same runs.
        key = (config["train"], config.get("test"), line["stack"], line.get("variant"),
               config["epochs"], line.get("seed"),
               config.get("peer_mining") if line["stack"] == "peer" else None)
        if key in seen:
            raise SystemExit(
                f"lines {seen[key]} and {number} are the same run ({line['stack']} "
                f"{line.get('variant') or ''} on {config['train']}, seed {line.get('seed')}, "
                f"commits {_commit(lines[seen[key] - 1])} and {_commit(line)}); keep one "
                "of them")
        seen[key] = number


def summary(lines):
    """The summary table, then the paired tables that the lines allow; the
    `--transfer` sets count as further test sets."""
    check_once(lines)
    lines = list(lines) + with_transfer(lines)
    parts = [summarize(lines), paired(lines), paired(lines, against="mined")]
    return "\n\n".join(part for part in parts if part)


def main():
    p = argparse.ArgumentParser(prog="python -m bench retrieval",
                                description=__doc__.splitlines()[0])
    p.add_argument("--train", default="stsb-en-train", help="folder under <shared>/retrieval")
    p.add_argument("--train-split", default="train")
    p.add_argument("--dev", default="stsb-en-dev",
                   help="folder under <shared>/retrieval, or slice:N (N train queries held out)")
    p.add_argument("--test", default="stsb-en-test")
    p.add_argument("--test-split", default="test")
    p.add_argument("--backend", default="torch")
    add_training_arguments(p, epochs=1, batch_size=32, weight_decay=False, max_length=False)
    p.add_argument("--seeds", default="42", type=seed_list,
                   help="comma-separated seeds, one run each")
    p.add_argument("--runs", default="zero-shot,keras,peer",
                   help="comma-separated: zero-shot, keras, peer")
    p.add_argument("--variants", default="mined",
                   help=f"comma-separated keras variants: {', '.join(VARIANTS)}")
    p.add_argument("--peer-mining", choices=("own", "ours"), default="own",
                   help="own: sentence-transformers' mine_hard_negatives; ours: the keras "
                   "run's mined.jsonl")
    p.add_argument("--transfer", default="",
                   help="comma-separated held-out sets, also scored: folders under "
                   f"<shared>/retrieval or {', '.join(BUILT)}")
    p.add_argument("--runs-dir", default=None, help="train outputs (default: a temporary folder)")
    p.add_argument("--out", help="JSON lines to append to")
    p.add_argument("--summarize", metavar="FILE", help="print the table of FILE and stop")
    args = p.parse_args()
    if args.summarize:
        print(summary(harness.read_lines(args.summarize, suites=("retrieval",))))
        return
    if not args.out:
        p.error("--out is required")

    import pathlib

    # Every argument checked before the first run: a typo found after hours of
    # training costs the hours.
    runs = args.runs.split(",")
    unknown = set(runs) - {"zero-shot", "keras", "peer"}
    if unknown:
        p.error(f"unknown --runs {sorted(unknown)}; choose from ['zero-shot', 'keras', 'peer']")
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        p.error(f"unknown --variants {sorted(unknown)}; choose from {list(VARIANTS)}")
    for option, values in (("--runs", runs), ("--variants", variants)):
        if repeated(values):
            p.error(f"{option}: {repeated(values)[0]} is given twice")
    dev_size = None  # --dev slice:N: N train queries held out
    if args.dev.startswith("slice:"):
        try:
            dev_size = positive_int(args.dev[len("slice:"):])
        except argparse.ArgumentTypeError:
            p.error(f"--dev {args.dev}: expected slice:N, N a positive number of train queries")
    root = shared_data_dir() / "retrieval"
    for option in ("train", "test") + (() if dev_size else ("dev",)):
        if not (root / getattr(args, option)).is_dir():
            p.error(f"--{option} {getattr(args, option)}: no folder {root / getattr(args, option)}")
    # Every option of the runs in their folders' names: `train` refuses a folder that
    # holds a run of other options, and --peer-mining ours must find this run's rows.
    tag = (f"{args.train}-{args.train_split}-dev-{args.dev.replace(':', '')}-{args.backend}"
           f"-e{args.epochs}-b{args.batch_size}-lr{args.lr:g}-w{args.warmup:g}")
    if args.peer_mining == "ours" and "peer" in runs and not (
            "keras" in runs and "mined" in variants):
        # The keras runs of an earlier invocation (same --runs-dir) mined them.
        missing = [seed for seed in args.seeds if args.runs_dir is None or not (
            pathlib.Path(args.runs_dir) / f"{tag}-mined-s{seed}" / "mined.jsonl").is_file()]
        if missing:
            p.error(f"--peer-mining ours trains the peer on the keras 'mined' variant's rows, "
                    f"and --runs-dir {args.runs_dir} has none for seed {missing[0]}: run that "
                    "variant first into the same --runs-dir, or add keras to --runs and mined "
                    "to --variants")
    runs_dir = pathlib.Path(args.runs_dir or tempfile.mkdtemp(prefix="keras-cosent-retrieval-"))
    runs_dir.mkdir(parents=True, exist_ok=True)
    folders = {"train": root / args.train, "test": root / args.test}
    dev_split = None
    if dev_size:
        carved = carve_dev(folders["train"], args.train_split, dev_size, runs_dir)
        folders.update(carved)
        train_split, dev_split = "train", "dev"
    else:
        folders["dev"] = root / args.dev
        train_split = args.train_split
    transfer = transfer_sets([n for n in args.transfer.split(",") if n], runs_dir)
    seeds = args.seeds
    config = {"train": args.train, "dev": args.dev, "test": args.test, "epochs": args.epochs,
              "batch_size": args.batch_size, "lr": args.lr, "warmup": args.warmup,
              "max_length": 64, "recipe": "retrieval-infonce", "model": "all-MiniLM-L6-v2",
              "peer_mining": args.peer_mining}
    if transfer:
        config["transfer"] = sorted(transfer)
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
        print(json.dumps({k: line.get(k) for k in ("stack", "variant", "seed", "figures")}),
              file=sys.stderr, flush=True)

    def scored(result):
        return {"figures": {k: result[k] for k in FIGURES},
                "per_query_ndcg@10": {q: v["ndcg@10"] for q, v in result["per_query"].items()}}

    def transferred(model, prefix, log):
        """The `--transfer` sets' figures of `model` (a line's `transfer` entry)."""
        return {name: scored(evaluate(model, folder, split, args.backend,
                                      runs_dir / f"{prefix}-{name}.json", log))
                for name, (folder, split) in transfer.items()}

    with open(runs_dir / "retrieval.log", "a", encoding="utf-8") as log:
        if "zero-shot" in runs:
            result = evaluate("all-MiniLM-L6-v2", folders["test"], args.test_split, args.backend,
                              runs_dir / "zero-shot.json", log)
            record("zero-shot", {k: result[k] for k in FIGURES},
                   **({"transfer": transferred("all-MiniLM-L6-v2", "zero-shot", log)}
                      if transfer else {}))
        for seed in seeds:
            for variant in variants if "keras" in runs else ():
                output = runs_dir / f"{tag}-{variant}-s{seed}"
                # `train` reuses a finished run of the same options in place: its
                # figures are the earlier commit's, its wall time the reuse's.
                reused = (output / "results.json").is_file()
                cmd = [sys.executable, "-m", "recipes", "train", "--backend", args.backend,
                       "--recipe", "retrieval-infonce", "--train-retrieval", folders["train"],
                       "--train-retrieval-split", train_split,
                       "--dev-retrieval", folders["dev"], "--epochs", args.epochs,
                       "--batch-size", args.batch_size, "--lr", args.lr, "--warmup", args.warmup,
                       "--max-length", 64, "--seed", seed, "--output", output,
                       *VARIANTS[variant]]
                if dev_split:
                    cmd += ["--dev-retrieval-split", dev_split]
                _, seconds = run(cmd, log)
                result = evaluate(output, folders["test"], args.test_split, args.backend,
                                  runs_dir / f"keras-{variant}-s{seed}.json", log)
                with open(output / "config.json", encoding="utf-8") as f:
                    run_config = json.load(f)
                with open(output / "results.json", encoding="utf-8") as f:
                    results = json.load(f)
                record(f"keras-{args.backend}", {**{k: result[k] for k in FIGURES},
                                                 "wall_seconds": round(seconds, 1),
                                                 "dev_ndcg@10_before": results[
                                                     "dev_retrieval_before_training"]["ndcg@10"],
                                                 "dev_ndcg@10": results["kept_epoch"]["value"]},
                       variant=variant, seed=seed, reused=reused, command=run_config["command"],
                       **{"per_query_ndcg@10": scored(result)["per_query_ndcg@10"]},
                       **({"transfer": transferred(output, f"keras-{variant}-s{seed}", log)}
                          if transfer else {}))
            if "peer" in runs:
                cmd = [sys.executable, REPO_ROOT / "bench" / "peer_retrieval.py",
                       "--negatives", 1, "--test", folders["test"], "--test-split",
                       args.test_split, "--epochs", args.epochs, "--batch-size", args.batch_size,
                       "--lr", args.lr, "--warmup", args.warmup, "--seed", seed]
                if args.peer_mining == "own":
                    cmd += ["--train-folder", folders["train"], "--train-split", train_split]
                else:
                    mined = runs_dir / f"{tag}-mined-s{seed}" / "mined.jsonl"
                    if not mined.is_file():
                        p.error("--peer-mining ours needs the keras 'mined' variant's rows")
                    cmd += ["--mined", mined]
                for name, (folder, split) in transfer.items():
                    cmd += ["--transfer", name, folder, split]
                stdout, seconds = run(cmd, log)
                result = json.loads(stdout.strip().splitlines()[-1])
                per_query = result["test"].pop("per_query_ndcg@10")
                record("peer", {**result["test"], "wall_seconds": round(seconds, 1),
                                "train_seconds": result["train_seconds"]},
                       # A row of its own in the summary, apart from the peer's own mining.
                       variant="mined" if args.peer_mining == "own" else "on-keras-rows",
                       seed=seed, rows=result["rows"],
                       command=" ".join(map(str, cmd)), **{"per_query_ndcg@10": per_query},
                       **({"transfer": {
                           name: {"figures": {k: v for k, v in got.items() if k in FIGURES},
                                  "per_query_ndcg@10": got["per_query_ndcg@10"]}
                           for name, got in result["transfer"].items()}} if transfer else {}))
    print(summary(lines))


if __name__ == "__main__":
    main()
