"""The peer of bench/losses.py: sentence-transformers' closest loss to each keras-cosent one.

Fine-tunes all-MiniLM-L6-v2 on the rows of a JSON-lines file (the one
`keras-cosent train` trains on in the same benchmark run) with:

- `triplet`: `TripletLoss(distance_metric=COSINE, triplet_margin=0.5)`
  ((anchor, positive, negative) rows);
- `margin`: `TripletLoss(distance_metric=COSINE, triplet_margin=0.2)` ((anchor,
  positive, negative) rows), keras-cosent's hinge `MarginRankingLoss(margin=0.2)`
  written as distances;
- `mnrl`: `MultipleNegativesRankingLoss(scale=20.0)` ((anchor, positive) rows);
- `matryoshka`: `MatryoshkaLoss(model, CoSENTLoss(model, scale=20.0), [384, 256, 128, 64])`;
- `cosent`: `CoSENTLoss(scale=20.0)` (scored pairs).
- `joint`: `--loss infonce:1.0,cosent:0.5` of keras-cosent, built from the peer's
  pieces, which have no joint loss: MultipleNegativesRankingLoss's formula (scale
  20) written out per row, averaged over the pairs scored above 2.5, each against
  all of the batch's second sentences, plus 0.5 x `CoSENTLoss(scale=20.0)` on all
  pairs, from one forward pass (scored pairs).
- `staged`: `MultipleNegativesRankingLoss(scale=20.0)` on the (premise, entailment,
  contradiction) triplets of `--pretrain` (an NLI file, read as keras-cosent reads
  it) for one epoch, then `CoSENTLoss(scale=20.0)` on the scored pairs for
  `--epochs`, each stage with its own AdamW and schedule, as
  `--recipe nli-infonce-then-sts-cosent`.

The loop is written out as in bench/peer_sts.py: AdamW (fused, the Trainer's
default) with no weight decay on biases and LayerNorm, linear warm-up (rounded
as keras-cosent rounds it) then linear decay, max 64 tokens. The batches are the
ones `keras-cosent train` trains on with the same seed: `keras_batch_plan`
replays `keras_cosent.data.PairBatches`' plan (a seeded permutation per epoch;
for `mnrl`, the placement that keeps every text once per batch). Then the
sentences of `--sentences` (one per line) are embedded (L2-normalised) into
`--embeddings-out`, for bench/losses.py to score; prints one JSON line.

    python bench/peer_losses.py --loss mnrl --train RUNS/positives.jsonl \\
        --text-columns anchor,positive --sentences RUNS/sts-test-sentences.txt \\
        --embeddings-out RUNS/peer-mnrl.npy --epochs 4 --seed 42
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DIMS = (384, 256, 128, 64)
# The keras-cosent objective each peer loss stands beside: its batching rules apply.
# The joint run's `keras-cosent train --loss`: its weights and InfoNCE threshold come
# from keras-cosent's joint objective (`joint_from_embeddings`).
JOINT_SPEC = "infonce:1.0,cosent:0.5"
OBJECTIVE_OF = {"triplet": "triplet", "margin": "margin-ranking", "mnrl": "infonce",
                "matryoshka": "cosent", "cosent": "cosent", "joint": JOINT_SPEC,
                "staged": "cosent"}


def keras_batch_plan(columns, batch_size, seed, epochs, unique_texts):
    """Row indices of each batch of each epoch, as `keras-cosent train` batches these rows.

    `keras_cosent.data.PairBatches` plans an epoch from the seed, the epoch number
    and which rows share texts, never from the token ids (the CLI packs batches,
    which skips the only length-dependent reordering), so a stand-in tokenizer
    gives the same plan.
    """
    import numpy as np

    from keras_cosent.data import PairBatches
    from keras_cosent.data import PairDataset

    data = PairDataset([list(c) for c in columns], np.zeros(len(columns[0]), "float32"), "plan")
    batches = PairBatches(data, lambda texts: [np.array([1, 2])] * len(texts), batch_size,
                          seed=seed, unique_texts=unique_texts, packing=True)
    plan = []
    for epoch in range(epochs):
        batches.set_epoch(epoch)
        plan.append([b.tolist() for b in batches._batches])
    return plan


def joint_terms():
    """(InfoNCE weight, CoSENT weight, InfoNCE's score threshold) of `JOINT_SPEC`."""
    objective = objective_of(JOINT_SPEC)
    names = [term.name for term in objective.terms]
    if names != ["infonce", "cosent"]:
        raise ValueError(
            f"the peer's joint loss is infonce + cosent; {JOINT_SPEC!r} names {names}")
    return (*objective.weights, objective.positive_above[0])


def joint_from_embeddings(anchors, others, labels, cosent, terms=None):
    """The joint run's loss from the pairs' embeddings (torch tensors) and scores.

    With `terms` (`joint_terms()` when None: 1.0, 0.5 and 2.5):
    MultipleNegativesRankingLoss's formula (scale 20) per row, averaged over the
    rows scored above the threshold (0 when there is none), each anchor against
    all of `others`, plus `cosent` (a `CoSENTLoss`) on every row.
    """
    import torch
    from sentence_transformers import util

    infonce_weight, cosent_weight, threshold = terms or joint_terms()
    scores = util.cos_sim(anchors, others) * 20.0
    per_row = torch.nn.functional.cross_entropy(
        scores, torch.arange(len(scores), device=scores.device), reduction="none")
    positive = (labels > threshold).to(per_row.dtype)
    infonce = (per_row * positive).sum() / positive.sum().clamp(min=1.0)
    return infonce_weight * infonce + cosent_weight * cosent.compute_loss_from_embeddings(
        [anchors, others], labels)


def joint_loss(model):
    """`joint_from_embeddings` on one forward pass of `model` over the batch's pairs."""
    from sentence_transformers.sentence_transformer import losses

    cosent = losses.CoSENTLoss(model, scale=20.0)
    terms = joint_terms()

    def loss(features, labels):
        anchors, others = (model(f)["sentence_embedding"] for f in features)
        return joint_from_embeddings(anchors, others, labels, cosent, terms)

    return loss


def objective_of(spec):
    """The keras-cosent objective named `spec` (a joint spec such as "infonce:1.0,cosent:0.5")."""
    from keras_cosent.training import OBJECTIVES
    from keras_cosent.training.objectives import joint_objective

    return joint_objective(spec) if ":" in spec else OBJECTIVES[spec]


def make_loss(model, name):
    from sentence_transformers.sentence_transformer import losses

    if name == "joint":
        return joint_loss(model)
    if name in ("triplet", "margin"):
        # margin-ranking's hinge, max(0, m - (cos(a,p) - cos(a,n))), is the cosine-distance
        # triplet loss with margin m; keras-cosent's defaults: 0.5 (triplet), 0.2 (margin).
        return losses.TripletLoss(model, distance_metric=losses.TripletDistanceMetric.COSINE,
                                  triplet_margin=0.5 if name == "triplet" else 0.2)
    if name == "mnrl":
        return losses.MultipleNegativesRankingLoss(model, scale=20.0)
    if name == "matryoshka":
        return losses.MatryoshkaLoss(model, losses.CoSENTLoss(model, scale=20.0), list(DIMS))
    return losses.CoSENTLoss(model, scale=20.0)


def main():
    from bench.common import add_training_arguments, positive_int

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loss", choices=sorted(OBJECTIVE_OF), required=True)
    p.add_argument("--train", required=True, help="JSON lines of training rows")
    p.add_argument("--text-columns", required=True, help="comma-separated keys, in order")
    p.add_argument("--label-column", default=None, help="score key (cosent, matryoshka)")
    p.add_argument("--sentences", required=True, help="sentences to embed, one per line")
    p.add_argument("--embeddings-out", required=True, help=".npy written at the end")
    add_training_arguments(p, epochs=4, batch_size=16)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--pretrain", default=None,
                   help="staged: the NLI file (nli-jsonl) of the first stage")
    p.add_argument("--pretrain-epochs", type=positive_int, default=1)
    args = p.parse_args()
    if (args.loss == "staged") != (args.pretrain is not None):
        p.error("--pretrain is required with --loss staged, and only with it")

    # keras_cosent.data (the reader, the batch plan) imports Keras: keep it on PyTorch.
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from bench.common import minilm_path, peer_optimizer
    from keras_cosent.data import read_dataset

    data = read_dataset(args.train, "jsonl", text_columns=args.text_columns.split(","),
                        label_column=args.label_column)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SentenceTransformer(minilm_path(), device=device)
    model.max_seq_length = args.max_length

    # (rows, loss, epochs, the keras-cosent objective whose batching it replays) per stage.
    stages = [(data, make_loss(model, args.loss), args.epochs, OBJECTIVE_OF[args.loss])]
    if args.pretrain is not None:
        from keras_cosent.training import OBJECTIVES

        triplets = OBJECTIVES["infonce"].prepare(
            read_dataset(args.pretrain, "nli-jsonl", mode="triplets"), "nli-jsonl")
        stages.insert(0, (triplets, make_loss(model, "mnrl"), args.pretrain_epochs, "infonce"))

    def features(texts):
        return {k: v.to(device) if hasattr(v, "to") else v
                for k, v in model.preprocess(texts).items()}

    start = time.time()
    losses, total = [], 0
    for rows, loss_fn, epochs, objective in stages:
        columns = [list(c) for c in rows.columns]
        labels = (np.zeros(len(rows), "float32") if rows.labels is None
                  else np.asarray(rows.labels, "float32"))
        plan = keras_batch_plan(columns, args.batch_size, args.seed, epochs,
                                objective_of(objective).unique_texts)
        # A fresh optimizer and schedule per stage, as `train --staged` builds each stage.
        steps = sum(len(batches) for batches in plan)
        total += steps
        opt, sched = peer_optimizer(model, args.lr, args.weight_decay, steps,
                                    round(args.warmup * steps))
        for batches in plan:
            model.train()
            for batch in batches:
                inputs = [features([column[i] for i in batch]) for column in columns]
                loss = loss_fn(inputs, torch.tensor(labels[batch], device=device))
                loss.backward()
                opt.step()
                sched.step()
                opt.zero_grad()
            losses.append(loss.item())
    train_seconds = round(time.time() - start, 1)
    model.eval()
    with open(args.sentences, encoding="utf-8") as f:
        sentences = f.read().split("\n")[:-1]
    embeddings = model.encode(sentences, batch_size=64, normalize_embeddings=True,
                              convert_to_numpy=True)
    np.save(args.embeddings_out, embeddings.astype("float32"))
    print(json.dumps({"stack": "sentence-transformers", "loss": args.loss, "rows": len(data),
                      "steps": total, "train_seconds": train_seconds,
                      "last_batch_loss_per_epoch": losses}), flush=True)


if __name__ == "__main__":
    main()
