"""Side-by-side quality benchmark: STS fine-tuning with keras-cosent vs sentence-transformers.

For each backend, runs `keras-cosent train` (the recipe users run) and, in the same
session, the peer script bench/peer_sts.py with the same settings, then prints
dev and test Spearman x 100 for each. Usage:

    .venv/bin/python bench/quality.py --data sts-benchmark --epochs 4 \
        --backends tensorflow,jax,torch --json bench/results/quality-en.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import REPO_ROOT, shared_data_dir  # noqa: E402

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
