"""The peer of the retrieval recipe: sentence-transformers' MultipleNegativesRankingLoss.

Fine-tunes all-MiniLM-L6-v2 either on rows it mines itself from a BEIR train
folder with sentence-transformers' `mine_hard_negatives` (`--train-folder`:
the recipe's mining settings, the 50 nearest candidates, relative margin 0.05,
the top `--negatives` kept, rows with fewer left out; needs the `datasets`
package), or on the rows `keras-cosent train --recipe retrieval-infonce` mined
(`--mined`, its run's `mined.jsonl`), with the recipe's settings: scale 20 (= temperature
0.05), cosine, batches with no text twice (as sentence-transformers'
NoDuplicatesBatchSampler builds them: rows in shuffled order, a row whose text
is already in the batch waits for a later one), AdamW (fused, as the
Trainer's default) with no weight decay on biases and LayerNorm, linear
warm-up then decay. The loop is written out as in bench/peer_sts.py (the
Trainer needs the `datasets` package). Test metrics come from keras-cosent's
own retrieval code (exact search, trec_eval-equal metrics) on the peer's
embeddings, so both stacks are scored by the same code, on `--test` and on each
`--transfer` set. Prints one JSON line.

    python bench/peer_retrieval.py --train-folder <shared>/retrieval/stsb-en-train \\
        --negatives 1 --test <shared>/retrieval/stsb-en-test --epochs 1 --batch-size 32
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def no_duplicate_batches(rows, batch_size, rng):
    """Batches of row indices in which no text occurs twice (NoDuplicatesBatchSampler)."""
    remaining = list(rng.permutation(len(rows)))
    batches = []
    while remaining:
        batch, seen, deferred = [], set(), []
        for index in remaining:
            texts = set(rows[index])
            if len(batch) < batch_size and not texts & seen:
                batch.append(index)
                seen |= texts
            else:
                deferred.append(index)
        batches.append(batch)
        remaining = deferred
    return batches


def test_metrics(model, folder, split):
    """nDCG/MRR/Recall@10, MAP@100 (x 100) of the model's cosine ranking, by keras-cosent's code,
    and each query's nDCG@10 (`per_query_ndcg@10`, for the paired comparison)."""
    import numpy as np

    from keras_cosent.data import read_beir
    from keras_cosent.retrieval import retrieval_metrics
    from keras_cosent.retrieval import run_from_top_k
    from keras_cosent.retrieval import top_k

    data = read_beir(folder, split)
    query_ids = list(data.qrels)
    q = model.encode([data.queries[i] for i in query_ids], batch_size=64)
    c = model.encode(list(data.corpus.values()), batch_size=64)
    scores, indices = top_k(np.asarray(q), np.asarray(c), 100)
    run = run_from_top_k(query_ids, list(data.corpus), scores, indices)
    values, per = retrieval_metrics(run, data.qrels, k_values=(10, 100), per_query=True)
    out = {key: 100.0 * values[key] for key in ("ndcg@10", "mrr@10", "recall@10", "map@100")}
    out["per_query_ndcg@10"] = {qid: 100.0 * row["ndcg@10"] for qid, row in per.items()}
    return out


def mine_with_peer(model, args):
    """(query, positive, negatives...) rows from sentence-transformers' own miner."""
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    from keras_cosent.data import read_beir

    data = read_beir(args.train_folder, args.train_split)
    pairs = [(data.queries[q], data.corpus[d])
             for q, judged in data.qrels.items() for d, score in judged.items() if score >= 1]
    start = time.time()
    mined = mine_hard_negatives(
        Dataset.from_dict({"anchor": [q for q, _ in pairs], "positive": [d for _, d in pairs]}),
        model, corpus=list(data.corpus.values()), range_max=args.mine_range_max,
        relative_margin=args.mine_relative_margin, num_negatives=args.negatives,
        sampling_strategy="top", output_format="n-tuple", batch_size=64, verbose=False,
    )
    rows = [list(row.values()) for row in mined]
    return rows, len(pairs) - len(rows), round(time.time() - start, 1)


def main():
    from bench.common import add_training_arguments, non_negative_float, positive_int

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--mined", help="mined.jsonl of the keras-cosent run")
    source.add_argument("--train-folder", help="BEIR folder to mine with mine_hard_negatives")
    p.add_argument("--train-split", default="train")
    p.add_argument("--mine-range-max", type=positive_int, default=50)
    p.add_argument("--mine-relative-margin", type=non_negative_float, default=0.05)
    p.add_argument("--negatives", type=positive_int, required=True,
                   help="negatives per row trained")
    p.add_argument("--test", required=True, help="BEIR folder scored at the end")
    p.add_argument("--test-split", default="test")
    p.add_argument("--transfer", nargs=3, action="append", default=[],
                   metavar=("NAME", "FOLDER", "SPLIT"),
                   help="a held-out BEIR set also scored at the end (repeatable)")
    add_training_arguments(p, epochs=1, batch_size=32, weight_decay=False)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--zero-shot", action="store_true", help="also score the untrained model")
    args = p.parse_args()

    os.environ.setdefault("KERAS_BACKEND", "torch")
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from bench.common import minilm_path, peer_optimizer
    from keras_cosent.data import read_retrieval_triplets

    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = SentenceTransformer(minilm_path(), device="cpu")
    model.max_seq_length = args.max_length
    if args.mined:
        dataset = read_retrieval_triplets(args.mined, num_negatives=args.negatives)
        rows = [list(row) for row in zip(*dataset.columns)]
        skipped, mining_seconds = dataset.skipped, 0.0
    else:
        rows, skipped, mining_seconds = mine_with_peer(model, args)
    out = {"stack": "sentence-transformers", "rows": len(rows), "skipped": skipped,
           "mining_seconds": mining_seconds}
    if args.zero_shot:
        model.eval()
        out["zero_shot"] = test_metrics(model, args.test, args.test_split)
    loss_fn = MultipleNegativesRankingLoss(model, scale=20.0)
    epochs = [no_duplicate_batches(rows, args.batch_size, rng) for _ in range(args.epochs)]
    total = sum(len(batches) for batches in epochs)
    opt, sched = peer_optimizer(model, args.lr, 0.01, total, int(args.warmup * total))
    start = time.time()
    for batches in epochs:
        model.train()
        for batch in batches:
            columns = [[rows[i][c] for i in batch] for c in range(len(rows[0]))]
            features = [model.preprocess(column) for column in columns]
            loss = loss_fn(features, torch.zeros(len(batch)))
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
    out["train_seconds"] = round(time.time() - start, 1)
    out["steps"] = total
    model.eval()
    out["test"] = test_metrics(model, args.test, args.test_split)
    out["transfer"] = {name: test_metrics(model, folder, split)
                       for name, folder, split in args.transfer}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
