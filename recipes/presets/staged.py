"""Staged training: contrastive pre-training on NLI, then CoSENT fine-tuning on STS.

`nli-infonce-then-sts-cosent` is two stages in one command and one run directory
(`train --staged`, `recipes.staged_training`). The first `--train` is an NLI file
(`nli-jsonl`, as `nli-simcse` reads it): its (premise, entailment, contradiction)
triplets train InfoNCE at temperature 0.05 with the contradiction as a hard
negative (supervised SimCSE). The second `--train` holds scored STS pairs
(`pair-tsv`, e.g. the Chinese STS-B; pass `--format nli-jsonl --format
sts-benchmark` for the English STS Benchmark's csv), trained with CoSENT at scale
20 as in `sts-cosent`. Both stages use batch 16, learning rate 2e-5 and 10%
warm-up, each stage with its own schedule; `--stage-epochs 1,4` gives one NLI
epoch and four STS epochs. `--dev` (read as the last `--format`) is scored after
every epoch of both stages.

    keras-cosent train --recipe nli-infonce-then-sts-cosent \\
        --train ocnli/train.10k.json --train sts-b-zh/STS-B.train.data \\
        --dev sts-b-zh/STS-B.valid.data --test sts-b-zh/STS-B.test.data \\
        --backbone path/to/chinese-bert --output runs/nli-then-sts
"""

from recipes.presets.recipe import Recipe

RECIPES = {
    "nli-infonce-then-sts-cosent": Recipe(
        name="nli-infonce-then-sts-cosent",
        summary="Stage 1 InfoNCE on NLI triplets, stage 2 CoSENT on STS (two --train files).",
        options={
            "staged": True,
            "loss": ("infonce", "cosent"),
            "format": ("nli-jsonl", "pair-tsv"),
            "stage_epochs": "1,4",
            "temperature": 0.05,
            "scale": 20.0,
            "batch_size": 16,
            "lr": 2e-5,
            "warmup": 0.1,
            "weight_decay": 0.01,
            "max_length": 64,
        },
        reference="Gao, Yao & Chen, SimCSE (EMNLP 2021), https://arxiv.org/abs/2104.08821; "
        "Su Jianlin, CoSENT (2022), https://kexue.fm/archives/8847",
        requires=("train",),
    ),
}
