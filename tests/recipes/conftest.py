"""Fixtures for the command-line tests: a runner, a tiny checkpoint, small data files.

The tiny checkpoint is a randomly initialised 1-layer BERT with a vocabulary made
from the demo set's words, saved as a keras-hub preset directory: it loads through
the same path as a real checkpoint in a fraction of a second.
"""

import pathlib
import re

import keras
import pytest
from click.testing import CliRunner

from recipes.cli import main

DATA_DIR = pathlib.Path(__file__).resolve().parents[2] / "recipes" / "data"


class Cli:
    """Runs `keras-cosent` in-process under the backend this test process uses."""

    def __init__(self):
        self.runner = CliRunner()

    def __call__(self, *args, input=None):
        return self.runner.invoke(main, [str(a) for a in args], input=input)


@pytest.fixture
def cli():
    return Cli()


def demo_rows(split="train"):
    """Rows of the packaged demo set as (sentence1, sentence2, score) tuples."""
    rows = []
    with open(DATA_DIR / f"demo-{split}.tsv", encoding="utf-8") as f:
        for line in f:
            first, second, score = line.rstrip("\n").split("\t")
            rows.append((first, second, float(score)))
    return rows


def write_pair_tsv(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for first, second, score in rows:
            f.write(f"{first}\t{second}\t{score}\n")
    return path


def save_tiny_checkpoint(path, seed=0, max_sequence_length=64, **backbone_options):
    """Saves a tiny random BERT over the demo set's words and its tokenizer as a preset in `path`."""
    import keras_hub

    words = set()
    for split in ("train", "dev"):
        for first, second, _ in demo_rows(split):
            words.update(re.findall(r"\w+|[^\w\s]", (first + " " + second).lower()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(words)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True)
    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocab), num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=max_sequence_length, **backbone_options,
    )
    backbone.save_to_preset(str(path))
    tokenizer.save_to_preset(str(path))
    return path


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A keras-hub preset directory holding a tiny random BERT and its tokenizer."""
    return save_tiny_checkpoint(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def no_dropout_checkpoint(tmp_path_factory):
    """The tiny BERT without dropout: a training step embeds as `encode` does, so a
    first step's logged loss can be checked against a reference on `encode`'s output."""
    return save_tiny_checkpoint(tmp_path_factory.mktemp("tiny_bert_no_dropout"), seed=1,
                                dropout=0.0)


@pytest.fixture
def small_train(tmp_path):
    """16 demo training pairs with varied scores."""
    return write_pair_tsv(tmp_path / "train.tsv", demo_rows("train")[:16])


@pytest.fixture
def small_dev(tmp_path):
    return write_pair_tsv(tmp_path / "dev.tsv", demo_rows("dev")[:24])


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, tiny_checkpoint):
    """A finished `train` run of the tiny checkpoint: 16 pairs, 2 epochs, with dev and test."""
    root = tmp_path_factory.mktemp("trained")
    train = write_pair_tsv(root / "train.tsv", demo_rows("train")[:16])
    dev = write_pair_tsv(root / "dev.tsv", demo_rows("dev")[:24])
    output = root / "run"
    result = Cli()(
        "train", "--backbone", tiny_checkpoint, "--train", train, "--dev", dev, "--test", dev,
        "--epochs", 2, "--batch-size", 8, "--max-length", 16, "--lr", 1e-3,
        "--output", output,
    )
    assert result.exit_code == 0, result.output
    return {"output": output, "train": train, "dev": dev, "result": result}
