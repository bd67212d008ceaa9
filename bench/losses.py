"""Quality of the embedding losses: keras-cosent next to sentence-transformers on STS-B.

For each run and seed asked for, from the packaged all-MiniLM-L6-v2 with the
settings of the STS-B CoSENT runs (batch 16, AdamW lr 2e-5, weight decay 0.01
not on biases and LayerNorm, 10% linear warm-up then linear decay, 64 tokens,
4 epochs): `keras-cosent train --backend torch` (the command users run) and the
peer, bench/peer_losses.py (sentence-transformers' closest loss in a plain
loop). Both train on the same rows, written once to a JSON-lines file in the
runs folder, in the same batches (the peer replays the batch plan that
`keras-cosent train` draws from the seed). Both are scored by the same code
here: the STS-B test sentences are embedded (`keras-cosent encode`; the peer's
`model.encode`), and the Spearman x 100 of the pair cosines against the gold
scores is computed at each dimension (first d coordinates, re-normalised).

Runs (`--runs`):

- `triplet`: (anchor, positive, negative) rows: the train pairs scored >= 4 as
  (anchor, positive), the negative another such row's positive drawn at random
  (seeded by `--data-seed`, not mined; never the row's own positive or anchor,
  nor a text scored >= 4 with the anchor). `--loss triplet --margin 0.5`
  (cosine distance) vs `TripletLoss(distance_metric=COSINE, triplet_margin=0.5)`.
- `margin`: the triplet rows. `--loss margin-ranking` (hinge, margin 0.2) vs
  `TripletLoss(distance_metric=COSINE, triplet_margin=0.2)`: with one negative,
  `max(0, 0.2 - (cos(a, p) - cos(a, n)))` is that loss term for term.
- `mnrl`: the (anchor, positive) pairs scored >= 4, in-batch negatives.
  `--loss infonce --temperature 0.05` vs `MultipleNegativesRankingLoss(scale=20)`;
  batches hold no text twice on both (the objective's `unique_texts`).
- `matryoshka`: every train pair. `--loss cosent --matryoshka-dims 384,256,128,64`
  vs `MatryoshkaLoss(model, CoSENTLoss(model), [384, 256, 128, 64])`, scored at
  each of those dimensions.
- `cosent`: plain CoSENT on every train pair, scored at the same dimensions: the
  reference that the Matryoshka run's truncated figures are read against.
- `joint`: every train pair, InfoNCE (temperature 0.05) on the pairs scored above
  2.5 against all of the batch's second sentences plus 0.5 x CoSENT on all pairs:
  `--loss infonce:1.0,cosent:0.5` vs the same sum built from sentence-transformers'
  pieces (`CoSENTLoss` and MultipleNegativesRankingLoss's formula written out per
  row, since the peer has no joint loss).
- `supcon`: class-labelled texts from the NLI file of `--nli` (OCNLI by
  default), not from the STS pairs: each (premise, entailed hypothesis) row is
  two views of one class, the premise (all of a premise's entailed hypotheses
  share its class). `--loss supcon --temperature 0.05`; keras-cosent only, the
  peer has no supervised contrastive loss (`--stacks peer` skips it).
- `staged`: `--recipe nli-infonce-then-sts-cosent`: one epoch of InfoNCE on the
  NLI triplets of `--nli` (OCNLI by default), then CoSENT on every train pair for
  `--epochs`, vs `MultipleNegativesRankingLoss` on the same triplets then
  `CoSENTLoss`, each stage with a fresh AdamW and schedule on both sides.

`--data sts-b-zh` trains and scores on the Chinese STS-B instead of STS-B.

Appends one JSON line per (run, stack, seed) to `--out` (the harness's schema:
suite "losses", figures `spearman@D` for each dimension scored, `wall_seconds`
of the training process, config, machine, versions, git commit) and prints the
table of `summarize`.

    python -m bench losses --runs triplet,margin,mnrl,matryoshka,cosent --seeds 1,2,3 \\
        --out bench/results/losses-en.jsonl
    python -m bench losses --runs mnrl --seeds 1 --train-limit 64 --epochs 1 --out /tmp/smoke.jsonl
    python -m bench losses --data sts-b-zh --runs cosent,joint,staged --seeds 1 \\
        --out bench/results/losses-zh.jsonl
    python -m bench losses --data sts-b-zh --runs supcon --stacks keras --seeds 1 \\
        --out bench/results/losses-zh.jsonl
    python -m bench losses --summarize bench/results/losses-en.jsonl
"""

import argparse
import datetime
import json
import os
import pathlib
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import harness  # noqa: E402
from bench.common import REPO_ROOT  # noqa: E402
from bench.common import add_training_arguments  # noqa: E402
from bench.common import positive_int  # noqa: E402
from bench.common import repeated  # noqa: E402
from bench.common import seed_list  # noqa: E402
from bench.common import shared_data_dir  # noqa: E402
from bench.peer_losses import JOINT_SPEC  # noqa: E402
from bench.common import run_logged as run  # noqa: E402
from bench.quality import load_splits  # noqa: E402
from bench.quality import split_paths  # noqa: E402

DIMS = (384, 256, 128, 64)
POSITIVE_AT_LEAST = 4.0
NLI_ENTAILMENT = 2  # read_nli_jsonl's ordinal label of entailment
# Which rows each run trains on: the JSON keys written, in column order.
LAYOUTS = {"pairs": ("sentence1", "sentence2", "score"),
           "positives": ("anchor", "positive"),
           "triplets": ("anchor", "positive", "negative"),
           "classes": ("premise", "hypothesis", "label")}
RUNS = {
    "triplet": {"rows": "triplets", "dims": (384,),
                "keras": ["--loss", "triplet", "--margin", 0.5]},
    "margin": {"rows": "triplets", "dims": (384,), "keras": ["--loss", "margin-ranking"]},
    "mnrl": {"rows": "positives", "dims": (384,),
             "keras": ["--loss", "infonce", "--temperature", 0.05]},
    "matryoshka": {"rows": "pairs", "dims": DIMS,
                   "keras": ["--loss", "cosent", "--scale", 20.0,
                             "--matryoshka-dims", ",".join(map(str, DIMS))]},
    "cosent": {"rows": "pairs", "dims": DIMS, "keras": ["--loss", "cosent", "--scale", 20.0]},
    "joint": {"rows": "pairs", "dims": (384,),
              "keras": ["--loss", JOINT_SPEC, "--temperature", 0.05,
                        "--scale", 20.0]},
    # Rows from the NLI file; no peer loss to stand beside it.
    "supcon": {"rows": "classes", "dims": (384,), "peer": False,
               "keras": ["--loss", "supcon", "--temperature", 0.05]},
    # Two --train files: the NLI file, then the pairs as a tab-separated file
    # (the recipe's pair-tsv).
    "staged": {"rows": "pairs", "dims": (384,), "staged": True,
               "keras": ["--recipe", "nli-infonce-then-sts-cosent"]},
}
DEFAULT_NLI = "ocnli/train.10k.json"


# === Rows ===


def positive_pairs(first, second, scores, at_least=POSITIVE_AT_LEAST):
    """The (anchor, positive) pairs scored at least `at_least`, in file order."""
    return [(a, p) for a, p, s in zip(first, second, scores) if s >= at_least]


def triplet_rows(pairs, seed, max_draws=1000):
    """(anchor, positive, negative) rows: each pair with another pair's positive, drawn at random.

    The negative is drawn uniformly from the other rows' positives (NumPy's
    generator seeded with `seed`) until it is neither the row's positive nor its
    anchor, nor a text that some pair scores as a positive of the anchor (in
    either order): a random sentence, not a mined hard negative.
    """
    if len(pairs) < 2:
        raise ValueError(f"triplet rows need at least 2 positive pairs; got {len(pairs)}")
    positives_of = {}
    for a, p in pairs:
        positives_of.setdefault(a, set()).add(p)
        positives_of.setdefault(p, set()).add(a)
    rng = np.random.default_rng(seed)
    rows = []
    for i, (anchor, positive) in enumerate(pairs):
        banned = {anchor, positive} | positives_of[anchor]
        for _ in range(max_draws):
            j = int(rng.integers(len(pairs)))
            if j != i and pairs[j][1] not in banned:
                rows.append((anchor, positive, pairs[j][1]))
                break
        else:
            raise ValueError(f"no negative found for row {i} ({anchor!r}) in {max_draws} draws: "
                             "every other positive is one of its own texts")
    return rows


def class_rows(nli_path):
    """(premise, entailed hypothesis, class) rows of an NLI file, the class an id per premise.

    Read as `keras-cosent train` reads nli-jsonl files (rows with no gold label
    dropped); classes are numbered in order of the premises' first appearance.
    """
    from keras_cosent.data import read_nli_jsonl

    data = read_nli_jsonl(nli_path)
    premises, hypotheses = data.columns
    classes = {}
    rows = [(p, h, classes.setdefault(p, len(classes)))
            for p, h, label in zip(premises, hypotheses, data.labels.tolist())
            if label == NLI_ENTAILMENT]
    if not rows:
        raise ValueError(f"{nli_path}: no entailment rows to build classes from")
    return rows


def build_rows(layout, first, second, scores, data_seed, nli_path=None):
    """The rows of `layout` (a key of LAYOUTS) from scored pairs (`classes`: from `nli_path`)."""
    if layout == "classes":
        return class_rows(nli_path)
    if layout == "pairs":
        return list(zip(first, second, scores))
    pairs = positive_pairs(first, second, scores)
    return pairs if layout == "positives" else triplet_rows(pairs, data_seed)


def write_rows(path, layout, rows):
    keys = LAYOUTS[layout]
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(dict(zip(keys, row)), ensure_ascii=False) + "\n")


def write_tsv(path, rows):
    """Scored pairs as `sentence1<TAB>sentence2<TAB>score` lines (the pair-tsv format)."""
    with open(path, "w", encoding="utf-8") as f:
        for i, (a, b, score) in enumerate(rows):
            if any(c in text for text in (a, b) for c in "\t\n"):
                raise ValueError(f"pair {i} holds a tab or newline; it cannot be written "
                                 f"as a pair-tsv line to {path}")
            f.write(f"{a}\t{b}\t{score:g}\n")


def column_args(layout):
    """`keras-cosent train` (and peer) options that read a LAYOUTS file."""
    keys = LAYOUTS[layout]
    if layout in ("pairs", "classes"):
        return ["--text-columns", ",".join(keys[:2]), "--label-column", keys[2]]
    return ["--text-columns", ",".join(keys)]


# === Scoring (the same code for both stacks) ===


def truncate(embeddings, dim):
    """The first `dim` coordinates of each row, L2-normalised (as `--truncate-dim` serves them)."""
    x = np.asarray(embeddings, dtype="float64")[:, :dim]
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def sts_spearman(embeddings, sentences, first, second, gold, dims):
    """{`spearman@D`: Spearman x 100 of the pair cosines against `gold`} for each D in `dims`.

    `embeddings[i]` embeds `sentences[i]`; `first`/`second` are the pairs' texts.
    """
    import scipy.stats

    index = {s: i for i, s in enumerate(sentences)}
    a = np.array([index[s] for s in first])
    b = np.array([index[s] for s in second])
    out = {}
    for dim in dims:
        z = truncate(embeddings, dim)
        cosine = np.sum(z[a] * z[b], axis=1)
        out[f"spearman@{dim}"] = 100.0 * scipy.stats.spearmanr(cosine, gold).statistic
    return out


# === Summary ===


def _cell(values):
    if not values:
        return "-"
    mean = statistics.fmean(values)
    return f"{mean:.2f}" if len(values) == 1 else f"{mean:.2f} ({min(values):.2f}-{max(values):.2f})"


# The settings that change what a run trains on or how (the rest of a line's config
# records how its rows were made, which the row count covers).
TRAINING_SETTINGS = ("data", "rows", "row_count", "train_limit", "epochs", "batch_size", "lr",
                     "warmup", "weight_decay", "max_length")


def check_once(lines):
    """Refuses a file in which a (run, stack, seed) appears twice, as when a command is
    rerun onto the same --out, or a run appears under two settings (a smoke run's
    --train-limit beside the full one): its means would mix them."""
    seen, settings = {}, {}
    for number, line in enumerate(lines, 1):
        key = (line["run"], line["stack"], line["seed"])
        if key in seen:
            raise SystemExit(
                f"lines {seen[key]} and {number} are the same run ({line['run']}, "
                f"{line['stack']}, seed {line['seed']}); keep one of them")
        seen[key] = number
        config = {k: line.get("config", {}).get(k) for k in TRAINING_SETTINGS}
        first = settings.setdefault(line["run"], (number, config))
        if config != first[1]:
            changed = [k for k in TRAINING_SETTINGS if first[1][k] != config[k]]
            raise SystemExit(
                f"lines {first[0]} and {number} train {line['run']} under different "
                f"settings ({', '.join(changed)}); summarize them from separate files")


def summarize(lines):
    """Markdown table: per run and dimension, keras vs peer test Spearman (mean and range
    over seeds), the difference of the means over the seeds both sides ran, and the
    mean wall seconds of a training process on each side."""
    check_once(lines)
    by_run = {}
    for line in lines:
        by_run.setdefault(line["run"], {}).setdefault(line["stack"], []).append(line)
    out = ["| run | dim | seeds | keras | peer | keras - peer | wall s keras / peer |",
           "|---|---:|---|---:|---:|---:|---:|"]
    for run_name, by_stack in by_run.items():
        peer = by_stack.get("peer", [])
        for stack in [s for s in by_stack if s != "peer"] or [None]:
            mine = by_stack.get(stack, [])
            name = run_name if stack in (None, "keras-torch") else f"{run_name} ({stack})"
            seeds = ",".join(map(str, sorted({g["seed"] for g in mine + peer})))
            wall = " / ".join(
                f"{statistics.fmean(g['figures']['wall_seconds'] for g in side):.0f}"
                if side else "-" for side in (mine, peer))
            dims = sorted({int(key.split("@")[1]) for g in mine + peer for key in g["figures"]
                           if key.startswith("spearman@")}, reverse=True)
            for dim in dims:
                key = f"spearman@{dim}"
                # By seed (check_once allows one line per seed): the gap pairs them, as
                # a seed only one side ran would shift one mean alone.
                ours = {g["seed"]: g["figures"][key] for g in mine if key in g["figures"]}
                theirs = {g["seed"]: g["figures"][key] for g in peer if key in g["figures"]}
                shared = sorted(set(ours) & set(theirs))
                gap = (f"{statistics.fmean(ours[s] - theirs[s] for s in shared):+.2f}"
                       if shared else "-")
                out.append(f"| {name} | {dim} | {seeds} | {_cell(list(ours.values()))} | "
                           f"{_cell(list(theirs.values()))} | "
                           f"{gap} | {wall} |")
    return "\n".join(out)


# === Running ===


def main():
    p = argparse.ArgumentParser(prog="python -m bench losses",
                                description=__doc__.splitlines()[0])
    p.add_argument("--runs", default="triplet,mnrl,matryoshka",
                   help=f"comma-separated, from {', '.join(RUNS)}")
    p.add_argument("--stacks", default="keras,peer", help="comma-separated: keras, peer")
    p.add_argument("--seeds", default="42", type=seed_list,
                   help="comma-separated seeds, one run each")
    add_training_arguments(p, epochs=4, batch_size=16)
    p.add_argument("--backend", default="torch", help="keras-cosent's backend")
    p.add_argument("--data", default="sts-benchmark", choices=("sts-benchmark", "sts-b-zh"),
                   help="the STS data trained and scored on")
    p.add_argument("--nli", default=None, help="NLI file (nli-jsonl) of the staged run's "
                   f"first stage (default: {DEFAULT_NLI} in the shared data)")
    p.add_argument("--train-limit", type=positive_int, default=None,
                   help="use only the first N train pairs (before any filtering)")
    p.add_argument("--data-seed", type=int, default=0,
                   help="seed of the triplets' random negatives (the same for every run seed)")
    p.add_argument("--runs-dir", default=None, help="rows, runs and embeddings "
                   "(default: a temporary folder)")
    p.add_argument("--out", help="JSON lines to append to")
    p.add_argument("--summarize", metavar="FILE", help="print the table of FILE and stop")
    args = p.parse_args()
    if args.summarize:
        print(summarize(harness.read_lines(args.summarize, suites=("losses",))))
        return
    if not args.out:
        p.error("--out is required")
    runs = [r.strip() for r in args.runs.split(",")]
    unknown = [r for r in runs if r not in RUNS]
    if unknown:
        p.error(f"unknown --runs {unknown}; choose from {list(RUNS)}")
    stacks = [s.strip() for s in args.stacks.split(",")]
    if set(stacks) - {"keras", "peer"}:
        p.error(f"--stacks: expected keras and/or peer, got {stacks}")
    for option, values in (("--runs", runs), ("--stacks", stacks)):
        if repeated(values):
            p.error(f"{option}: {repeated(values)[0]} is given twice")
    seeds = args.seeds

    # The readers import Keras; PyTorch starts faster than TensorFlow, Keras' default. The
    # train/encode commands get --backend, and the peer runs on PyTorch anyway.
    os.environ.setdefault("KERAS_BACKEND", "torch")
    runs_dir = pathlib.Path(args.runs_dir or tempfile.mkdtemp(prefix="keras-cosent-losses-"))
    runs_dir.mkdir(parents=True, exist_ok=True)
    splits = load_splits(args.data)
    first, second, scores = (c[: args.train_limit] for c in splits["train"])
    test = splits["test"]
    # Each distinct test sentence once, one per line, as `keras-cosent encode` reads them.
    sentences = list(dict.fromkeys(test[0] + test[1]))
    sentences_file = runs_dir / "sts-test-sentences.txt"
    sentences_file.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    eval_format, paths = split_paths(args.data)
    nli = pathlib.Path(args.nli or shared_data_dir() / DEFAULT_NLI)
    limit_tag = "" if args.train_limit is None else f"-limit{args.train_limit}"
    row_files = {}
    for layout in dict.fromkeys(RUNS[r]["rows"] for r in runs):
        name = f"{layout}{limit_tag}" + (f"-dataseed{args.data_seed}" if layout == "triplets" else "")
        rows = build_rows(layout, first, second, scores, args.data_seed, nli)
        row_files[layout] = (runs_dir / f"{name}.jsonl", len(rows))
        write_rows(row_files[layout][0], layout, rows)
        if layout == "pairs" and any(RUNS[r].get("staged") for r in runs):
            write_tsv(runs_dir / f"{name}.tsv", rows)

    settings = {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr,
                "warmup": args.warmup, "weight_decay": args.weight_decay,
                "max_length": args.max_length}
    common = {"schema": harness.SCHEMA, "suite": "losses", "round": 1, "toggles": {},
              "pieces": {}, "machine": harness.machine(), "versions": harness.versions(),
              "git": harness.git_state()}
    lines = []

    def record(name, stack, seed, figures, **extra):
        layout = RUNS[name]["rows"]
        # Only the settings that made this run's rows: the classes come from the
        # NLI file, not the STS train split; only positives and triplets are cut
        # at a score.
        config = dict(settings, data=args.data, model="all-MiniLM-L6-v2", run=name,
                      rows=layout, row_count=row_files[layout][1],
                      train_limit=None if layout == "classes" else args.train_limit,
                      positive_at_least=(POSITIVE_AT_LEAST
                                         if layout in ("positives", "triplets") else None),
                      data_seed=args.data_seed if layout == "triplets" else None,
                      **({"nli": str(nli), "stage_epochs": [1, args.epochs]}
                         if RUNS[name].get("staged") else {}),
                      **({"nli": str(nli)} if layout == "classes" else {}))
        line = dict(common, stack=stack, run=name, seed=seed, config=config,
                    figures={k: round(v, 4) for k, v in figures.items()}, **extra,
                    load_average_after=[round(x, 2) for x in os.getloadavg()],
                    timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat())
        lines.append(line)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps({k: line[k] for k in ("run", "stack", "seed", "figures")}),
              file=sys.stderr, flush=True)

    with open(runs_dir / "losses.log", "a", encoding="utf-8") as log:
        for seed in seeds:
            for name in runs:
                spec = RUNS[name]
                rows_file = row_files[spec["rows"]][0]
                data_tag = "" if args.data == "sts-benchmark" else f"-{args.data}"
                # Every training option in the name: `train` refuses a folder that
                # holds a run of other options, and a reused run must be this one.
                tag = (f"{name}{data_tag}{limit_tag}-dataseed{args.data_seed}-e{args.epochs}"
                       f"-b{args.batch_size}-lr{args.lr:g}-w{args.warmup:g}"
                       f"-wd{args.weight_decay:g}-len{args.max_length}-s{seed}")
                if spec.get("staged"):
                    train_args = ["--train", nli, "--train", rows_file.with_suffix(".tsv"),
                                  "--stage-epochs", f"1,{args.epochs}"]
                else:
                    train_args = ["--train", rows_file, "--format", "jsonl",
                                  *column_args(spec["rows"])]
                if "keras" in stacks:
                    output = runs_dir / f"keras-{args.backend}-{tag}"
                    reused = (output / "results.json").is_file()
                    cmd = [sys.executable, "-m", "recipes", "train", "--backend", args.backend,
                           *spec["keras"], *train_args, "--test", paths["test"],
                           "--eval-format", eval_format, "--epochs", args.epochs,
                           "--batch-size", args.batch_size, "--lr", args.lr,
                           "--warmup", args.warmup, "--weight-decay", args.weight_decay,
                           "--max-length", args.max_length, "--seed", seed, "--output", output]
                    _, seconds = run(cmd, log)
                    embeddings = runs_dir / f"keras-{args.backend}-{tag}-test.npy"
                    run([sys.executable, "-m", "recipes", "encode", "--backend", args.backend,
                         output, sentences_file, "-o", embeddings, "--batch-size", 64,
                         "--max-length", args.max_length], log)
                    with open(output / "results.json", encoding="utf-8") as f:
                        own = json.load(f)["test"]["spearman"]
                    figures = sts_spearman(np.load(embeddings), sentences, *test, spec["dims"])
                    figures.update(wall_seconds=round(seconds, 1), own_test_spearman=own)
                    record(name, f"keras-{args.backend}", seed, figures, reused=reused,
                           command=" ".join(map(str, cmd)))
                if "peer" in stacks and spec.get("peer", True):
                    embeddings = runs_dir / f"peer-{tag}-test.npy"
                    cmd = [sys.executable, REPO_ROOT / "bench" / "peer_losses.py",
                           "--loss", name, "--train", rows_file, *column_args(spec["rows"]),
                           "--sentences", sentences_file, "--embeddings-out", embeddings,
                           "--epochs", args.epochs, "--batch-size", args.batch_size,
                           "--lr", args.lr, "--warmup", args.warmup,
                           "--weight-decay", args.weight_decay,
                           "--max-length", args.max_length, "--seed", seed,
                           *(["--pretrain", nli] if spec.get("staged") else [])]
                    stdout, seconds = run(cmd, log)
                    result = json.loads(stdout.strip().splitlines()[-1])
                    figures = sts_spearman(np.load(embeddings), sentences, *test, spec["dims"])
                    figures.update(wall_seconds=round(seconds, 1),
                                   train_seconds=result["train_seconds"])
                    record(name, "peer", seed, figures, steps=result["steps"],
                           command=" ".join(map(str, cmd)))
    print(summarize(lines))


if __name__ == "__main__":
    main()
