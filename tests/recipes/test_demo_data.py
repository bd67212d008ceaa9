"""The packaged demo set: its size, its scores, and that its generator reproduces it."""

import subprocess
import sys

import numpy as np

from keras_cosent.data import read_pair_tsv
from tests.recipes.conftest import DATA_DIR

REPO_ROOT = DATA_DIR.parents[1]


def test_demo_splits_read_as_pair_tsv():
    train = read_pair_tsv(DATA_DIR / "demo-train.tsv")
    dev = read_pair_tsv(DATA_DIR / "demo-dev.tsv")
    assert (len(train), len(dev)) == (320, 80)
    for split in (train, dev):
        assert split.labels.min() == 0.0 and split.labels.max() == 5.0
        # Graded, not binary: every integer bucket 0..5 is used.
        assert set(np.round(split.labels).astype(int)) == set(range(6))
    train_pairs = {frozenset(p) for p in train.pairs}
    assert not train_pairs & {frozenset(p) for p in dev.pairs}


def test_generator_reproduces_the_packaged_files(tmp_path):
    subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "make_demo_data.py"),
         "--out-dir", str(tmp_path)],
        check=True, capture_output=True,
    )
    for name in ("demo-train.tsv", "demo-dev.tsv"):
        assert (tmp_path / name).read_bytes() == (DATA_DIR / name).read_bytes()


def test_demo_set_is_documented():
    readme = (DATA_DIR / "README.md").read_text()
    assert "License" in readme and "make_demo_data.py" in readme
