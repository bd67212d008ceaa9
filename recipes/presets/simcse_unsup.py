"""Unsupervised SimCSE: InfoNCE between two dropout views of the same sentence.

Every sentence of the corpus is encoded twice in training mode; the encoder's
dropout makes the two embeddings differ, and InfoNCE at temperature 0.05 pulls
them together against the rest of the batch. Any corpus works: one sentence per
line (`--format text-lines`), or the sentences of any pair file (every distinct
sentence of every column is used). One epoch, learning rate 3e-5 and sentences
cut to 32 tokens follow the paper's BERT-base set-up; batch 64 is the paper's and
needs no labels. Two things differ from the authors' script: the pooling is the
checkpoint's (mean for all-MiniLM-L6-v2; `--pooling cls` for theirs, which also
trains an MLP over CLS that is then dropped), and the weight decay is train's
0.01 (their Trainer's default is 0; `--weight-decay 0`). Evaluate on a scored
STS file with `--dev` and `--eval-format`.

    keras-cosent train --recipe simcse-unsup --train corpus.txt \\
        --dev stsbenchmark/sts-dev.csv --eval-format sts-benchmark --output runs/simcse

`esimcse-unsup` is ESimCSE (Wu et al. 2022) on the same set-up: the positive view
of each sentence gets some of its tokens duplicated (word repetition, rate 0.32,
the paper's BERT-base value), so the two views differ in length, and each anchor
is also contrasted with a queue of the last 160 positives (2.5 batches of 64, as
in the authors' runs; the queue stays 160 under another `--batch-size`) embedded
by a momentum encoder (EMA coefficient 0.995).
"""

from recipes.presets.recipe import Recipe

RECIPES = {
    "simcse-unsup": Recipe(
        name="simcse-unsup",
        summary="Unsupervised SimCSE: InfoNCE over dropout views, temperature 0.05, 1 epoch.",
        options={
            "loss": "simcse",
            "format": "text-lines",
            "temperature": 0.05,
            "epochs": 1,
            "batch_size": 64,
            "lr": 3e-5,
            "warmup": 0.0,
            "max_length": 32,
        },
        reference="Gao, Yao & Chen, SimCSE (EMNLP 2021), https://arxiv.org/abs/2104.08821",
    ),
    "esimcse-unsup": Recipe(
        name="esimcse-unsup",
        summary="ESimCSE: SimCSE + word repetition 0.32 + momentum queue of 160 (mu 0.995).",
        options={
            "loss": "simcse",
            "format": "text-lines",
            "temperature": 0.05,
            "epochs": 1,
            "batch_size": 64,
            "lr": 3e-5,
            "warmup": 0.0,
            "max_length": 32,
            "word_repetition": 0.32,
            "queue_size": 160,
            "momentum": 0.995,
        },
        reference="Wu et al., ESimCSE (COLING 2022), https://arxiv.org/abs/2109.04380",
    ),
}
