"""The peer of bench/losses.py: sentence-transformers' closest loss to each keras-cosent one.

Fine-tunes all-MiniLM-L6-v2 on the rows of a JSON-lines file (the one
`keras-cosent train` trains on in the same benchmark run) with:

- `triplet`: `TripletLoss(distance_metric=COSINE, triplet_margin=0.5)`
  ((anchor, positive, negative) rows);
- `mnrl`: `MultipleNegativesRankingLoss(scale=20.0)` ((anchor, positive) rows);
- `matryoshka`: `MatryoshkaLoss(model, CoSENTLoss(model, scale=20.0), [384, 256, 128, 64])`;
- `cosent`: `CoSENTLoss(scale=20.0)` (scored pairs).

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
OBJECTIVE_OF = {"triplet": "triplet", "mnrl": "infonce", "matryoshka": "cosent",
                "cosent": "cosent"}


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


def make_loss(model, name):
    from sentence_transformers.sentence_transformer import losses

    if name == "triplet":
        return losses.TripletLoss(model, distance_metric=losses.TripletDistanceMetric.COSINE,
                                  triplet_margin=0.5)
    if name == "mnrl":
        return losses.MultipleNegativesRankingLoss(model, scale=20.0)
    if name == "matryoshka":
        return losses.MatryoshkaLoss(model, losses.CoSENTLoss(model, scale=20.0), list(DIMS))
    return losses.CoSENTLoss(model, scale=20.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loss", choices=sorted(OBJECTIVE_OF), required=True)
    p.add_argument("--train", required=True, help="JSON lines of training rows")
    p.add_argument("--text-columns", required=True, help="comma-separated keys, in order")
    p.add_argument("--label-column", default=None, help="score key (cosent, matryoshka)")
    p.add_argument("--sentences", required=True, help="sentences to embed, one per line")
    p.add_argument("--embeddings-out", required=True, help=".npy written at the end")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--warmup", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()

    # keras_cosent.data (the reader, the batch plan) imports Keras: keep it on PyTorch.
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import get_linear_schedule_with_warmup

    from bench.common import minilm_path
    from keras_cosent.data import read_dataset
    from keras_cosent.training import OBJECTIVES

    data = read_dataset(args.train, "jsonl", text_columns=args.text_columns.split(","),
                        label_column=args.label_column)
    columns = [list(c) for c in data.columns]
    labels = (np.zeros(len(data), "float32") if data.labels is None
              else np.asarray(data.labels, "float32"))
    plan = keras_batch_plan(columns, args.batch_size, args.seed, args.epochs,
                            OBJECTIVES[OBJECTIVE_OF[args.loss]].unique_texts)

    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SentenceTransformer(minilm_path(), device=device)
    model.max_seq_length = args.max_length
    loss_fn = make_loss(model, args.loss)
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters()
             if not (n.endswith("bias") or "LayerNorm" in n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, fused=True,
    )
    total = sum(len(batches) for batches in plan)
    sched = get_linear_schedule_with_warmup(opt, round(args.warmup * total), total)

    def features(texts):
        return {k: v.to(device) if hasattr(v, "to") else v
                for k, v in model.preprocess(texts).items()}

    start = time.time()
    losses = []
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
