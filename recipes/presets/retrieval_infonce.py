"""Retrieval fine-tuning: InfoNCE with in-batch and mined hard negatives, best dev epoch kept.

`train --train-retrieval FOLDER` reads a BEIR folder (queries, corpus, qrels),
mines hard negatives for every (query, positive) with the starting encoder
(the `--backbone`) into the run directory (`mined.jsonl`, the format of
`keras-cosent mine`), and trains on (query, positive, negatives...) rows. The
recipe is the set-up of sentence-transformers' MultipleNegativesRankingLoss with
mined negatives: scale 20 (temperature 0.05), in-batch negatives plus one
mined negative per row, no text twice in a batch, rows that share a positive
not counted as each other's negatives (false-negative masking). Mining skips
candidates scoring above 95% of the positive's cosine (`--mine-relative-margin
0.05`, NV-Retriever's "TopK-PercPos"), which are often unlabelled positives. A
weak starting model ranks many positives so low that no nearby candidate
passes the margin; those rows get a random document the margin accepts
instead (`--mine-fill random`, the default) rather than being dropped, so every
row trains (BENCHMARKS.md measures what dropping them costs).
nDCG@10 on `--dev-retrieval` (or on queries of the training folder held out
by `--dev-retrieval-holdout N`, for sets with no dev split) is measured after
every epoch and the best epoch's weights are the saved encoder (`--keep-best
ir_dev_ndcg@10`). Texts are cut at the model's token limit (`--max-length`
left unset), not at `train`'s 64 for STS sentences.

    keras-cosent train --recipe retrieval-infonce \\
        --train-retrieval data/retrieval/stsb-en-train \\
        --dev-retrieval data/retrieval/stsb-en-dev --output runs/retrieval
"""

from recipes.presets.recipe import Recipe

RECIPES = {
    "retrieval-infonce": Recipe(
        name="retrieval-infonce",
        summary="Retrieval: mined hard negatives + InfoNCE (temperature 0.05), best dev "
                "nDCG@10 kept.",
        options={
            "loss": "infonce",
            "temperature": 0.05,
            "mine_negatives": 1,
            "mine_relative_margin": 0.05,
            "keep_best": "ir_dev_ndcg@10",
            "epochs": 3,
            "batch_size": 32,
            "lr": 2e-5,
            "warmup": 0.1,
            "weight_decay": 0.01,
            # The model's token limit (256 for all-MiniLM-L6-v2): documents run
            # longer than STS sentences, and batches are padded to their longest
            # row only, so short texts cost no more.
            "max_length": None,
        },
        reference="Henderson et al., Efficient Natural Language Response Suggestion "
        "(2017), https://arxiv.org/abs/1705.00652; Moreira et al., NV-Retriever: "
        "positive-aware hard-negative mining (2024), https://arxiv.org/abs/2407.15831",
        requires=("train_retrieval", "dev_retrieval"),
    ),
}
