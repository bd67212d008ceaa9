"""The peer: fine-tune all-MiniLM-L6-v2 with sentence-transformers' CoSENTLoss.

The settings are those of `keras-cosent train` in bench/quality.py: batch 16,
AdamW lr 2e-5 with 10% linear warm-up then linear decay, weight decay 0.01,
max 64 tokens, mean pooling (the checkpoint's own), no weight decay on biases and
LayerNorm weights, pairs shuffled every epoch,
nothing selected on test. The loop is written out (rather than going through the
Trainer, which needs the `datasets` package) so that each step is exactly the
model's forward, the library's loss and AdamW. Prints one JSON line with
Spearman x 100 of the cosine on dev and test, computed with scipy.

    .venv/bin/python bench/peer_sts.py --data sts-benchmark --epochs 4
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    from bench.common import positive_float, positive_int

    p = argparse.ArgumentParser(prog="python -m bench tool peer-sts", description=__doc__.splitlines()[0])
    p.add_argument("--data", choices=["sts-benchmark", "sts-b-zh"], default="sts-benchmark")
    p.add_argument("--epochs", type=positive_int, default=4)
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--lr", type=positive_float, default=2e-5)
    p.add_argument("--max-length", type=positive_int, default=64)
    p.add_argument("--limit", type=positive_int, default=None,
                   help="use only the first N train pairs")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    import numpy as np
    import scipy.stats
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss

    from bench.common import minilm_path, peer_optimizer
    from bench.quality import load_splits

    splits = load_splits(args.data)
    s1, s2, y = splits["train"]
    if args.limit:
        s1, s2, y = s1[: args.limit], s2[: args.limit], y[: args.limit]
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = SentenceTransformer(minilm_path(), device="cpu")
    model.max_seq_length = args.max_length
    loss_fn = CoSENTLoss(model, scale=20.0)
    steps_per_epoch = -(-len(s1) // args.batch_size)
    total = steps_per_epoch * args.epochs
    opt, sched = peer_optimizer(model, args.lr, 0.01, total, int(0.1 * total))

    def spearman(split):
        a, b, gold = splits[split]
        ea = model.encode(a, batch_size=64, normalize_embeddings=True)
        eb = model.encode(b, batch_size=64, normalize_embeddings=True)
        return 100 * scipy.stats.spearmanr((ea * eb).sum(-1), gold).statistic

    history = []
    t0 = time.time()
    for epoch in range(args.epochs):
        model.train()
        order = rng.permutation(len(s1))
        for start in range(0, len(order), args.batch_size):
            idx = order[start : start + args.batch_size]
            features = [model.preprocess([s1[i] for i in idx]), model.preprocess([s2[i] for i in idx])]
            loss = loss_fn(features, torch.tensor([y[i] for i in idx], dtype=torch.float32))
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
        model.eval()
        history.append({"epoch": epoch + 1, "loss": float(loss), "dev_spearman": spearman("dev")})
        print(json.dumps(history[-1]), file=sys.stderr, flush=True)
    print(json.dumps({
        "stack": "sentence-transformers", "data": args.data, "epochs": args.epochs,
        "train_pairs": len(s1), "dev_spearman": history[-1]["dev_spearman"] if history else spearman("dev"),
        "test_spearman": spearman("test"), "train_seconds": round(time.time() - t0, 1),
        "history": history,
    }), flush=True)


if __name__ == "__main__":
    main()
