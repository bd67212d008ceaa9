"""Supervised training on NLI (OCNLI): as CoSENT over ordered labels, or as supervised SimCSE.

`nli-cosent` reads premise/hypothesis pairs labelled entailment (2) > neutral (1) >
contradiction (0) and ranks their cosines with CoSENT: only the order of the labels
matters, which is what lets CoSENT use NLI data directly (the CoSENT write-up's
point). `nli-simcse` groups the pairs by premise into (premise, entailed
hypothesis, contradicting hypothesis) triplets and trains InfoNCE with the
contradiction as a hard negative, temperature 0.05, as supervised SimCSE does
(one triplet per entailed hypothesis; neutral pairs and premises lacking an
entailment or a contradiction are left out: 2,071 triplets of the 9,985 pairs of
OCNLI's train.10k; batch 64, where the paper's is 512).
OCNLI is Chinese: pass a backbone whose vocabulary covers it (`--backbone`), and
evaluate on OCNLI's dev set or on a Chinese STS file (`--eval-format pair-tsv`).

    keras-cosent train --recipe nli-cosent --train ocnli/train.10k.json \\
        --dev ocnli/dev.json --output runs/nli-cosent
    keras-cosent train --recipe nli-simcse --train ocnli/train.10k.json \\
        --dev sts-b-zh/STS-B.valid.data --eval-format pair-tsv --output runs/nli-simcse
"""

from recipes.presets.recipe import Recipe

_NLI = {"format": "nli-jsonl", "max_length": 64, "warmup": 0.1, "weight_decay": 0.01}

RECIPES = {
    "nli-cosent": Recipe(
        name="nli-cosent",
        summary="OCNLI as CoSENT: entailment > neutral > contradiction, scale 20.",
        options={**_NLI, "loss": "cosent", "scale": 20.0, "epochs": 1,
                 "batch_size": 32, "lr": 2e-5},
        reference="Su Jianlin, CoSENT (2022), https://kexue.fm/archives/8847; "
        "Hu et al., OCNLI (2020), https://arxiv.org/abs/2010.05444",
    ),
    "nli-simcse": Recipe(
        name="nli-simcse",
        summary="OCNLI as supervised SimCSE: InfoNCE, contradiction as hard negative.",
        options={**_NLI, "loss": "infonce", "temperature": 0.05, "epochs": 3,
                 "batch_size": 64, "lr": 5e-5},
        reference="Gao, Yao & Chen, SimCSE (EMNLP 2021), https://arxiv.org/abs/2104.08821",
    ),
}
