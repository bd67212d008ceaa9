"""STS fine-tuning with CoSENT: the set-up of the CoSENT write-up and Sentence-BERT's STS script.

Scored sentence pairs (e.g. STS Benchmark, `--format sts-benchmark`, or the Chinese
STS-B, `--format pair-tsv`) train a bi-encoder with the CoSENT ranking loss at scale
20; Sentence-BERT's STS-B fine-tuning script gives the optimiser settings (AdamW,
learning rate 2e-5, 10% linear warm-up, batch 16, 4 epochs). These are also
`train`'s defaults, so the recipe mostly names them.

    keras-cosent train --recipe sts-cosent --format sts-benchmark \\
        --train stsbenchmark/sts-train.csv --dev stsbenchmark/sts-dev.csv \\
        --test stsbenchmark/sts-test.csv --output runs/sts-cosent
"""

from recipes.presets.recipe import Recipe

RECIPES = {
    "sts-cosent": Recipe(
        name="sts-cosent",
        summary="STS fine-tuning with CoSENT (scale 20, 4 epochs, batch 16, lr 2e-5).",
        options={
            "loss": "cosent",
            "scale": 20.0,
            "epochs": 4,
            "batch_size": 16,
            "lr": 2e-5,
            "warmup": 0.1,
            "weight_decay": 0.01,
            "max_length": 64,
        },
        reference="Su Jianlin, CoSENT (2022), https://kexue.fm/archives/8847; "
        "Reimers & Gurevych, Sentence-BERT (2019), https://arxiv.org/abs/1908.10084",
    ),
}
