"""Trains a tiny encoder data-parallel on two devices with both evaluators as callbacks; a script.

`tests/distributed/test_evaluation.py` starts it in a fresh process (JAX and
TensorFlow) or once per rank under `torchrun --nproc_per_node 2` (PyTorch),
for the reasons given in `tests/distributed/worker.py`, whose data and device
set-up it shares.

    python tests/distributed/evaluation_worker.py OUT_DIR

Two epochs of three CoSENT steps on 2 devices, with `SpearmanEvaluator` and
`RetrievalEvaluator` scoring at each epoch end, on splits whose sizes (13
distinct STS sentences, 3 queries, 9 documents) and encoding batch (4) do not
divide by the device count. A callback after them keeps the epoch logs and
the encoder's weights. After `fit`, outside any distribution, a second encoder
gets each epoch's weights and is scored on one device, by the same
evaluators (`single`) and independently (`reference`: `scipy.stats.spearmanr`
/ `pearsonr` of its pair cosines and `pytrec_eval` of its full cosine
ranking). Each rank writes `OUT_DIR/rank<r>.json`:
`[{"logs": {...}, "single": {...}, "reference": {...}}, ...]`, one entry per
epoch.
"""

import json
import os
import sys

import numpy as np

EPOCHS = 2
EVAL_BATCH = 4
WORDS = [f"w{i}" for i in range(27)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]  # 32, the worker's ids


def texts(rng, count, taken):
    """`count` new distinct sentences of 2 to 5 words."""
    out = []
    while len(out) < count:
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(2, 6))))
        if text not in taken:
            taken.add(text)
            out.append(text)
    return out


def splits(seed=0):
    rng = np.random.default_rng(seed)
    taken = set()
    sentences = texts(rng, 13, taken)
    # 7 pairs over 13 distinct sentences: the last pair reuses the first sentence.
    pairs = [(sentences[2 * i], sentences[2 * i + 1]) for i in range(6)]
    pairs.append((sentences[12], sentences[0]))
    scores = rng.uniform(0, 5, size=len(pairs)).round(1)
    scores[3] = scores[1]  # a tie in the gold scores
    queries = dict(zip(["q0", "q1", "q2"], texts(rng, 3, taken)))
    corpus = {f"d{i}": text for i, text in enumerate(texts(rng, 9, taken))}
    qrels = {q: {f"d{j}": int(rng.integers(1, 3)) for j in rng.choice(9, 2, replace=False)}
             for q in queries}
    return pairs, scores, queries, corpus, qrels


def make_encoder():
    import keras
    import keras_hub

    import keras_cosent

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=16, dropout=0.0,
    )
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=False)
    return keras_cosent.models.SentenceEncoder(backbone, tokenizer, max_length=16)


def reference(encoder, pairs, scores, queries, corpus, qrels):
    """The single-device scores: SciPy and pytrec_eval on one device's embeddings."""
    import pytrec_eval
    import scipy.stats

    def unit(texts):
        e = np.asarray(encoder.encode(texts, batch_size=EVAL_BATCH), "float64")
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    first, second = unit([a for a, _ in pairs]), unit([b for _, b in pairs])
    cosine = np.sum(first * second, axis=1)
    out = {
        "sts_dev_spearman": float(scipy.stats.spearmanr(scores, cosine)[0]),
        "sts_dev_pearson": float(scipy.stats.pearsonr(scores, cosine)[0]),
    }
    similarity = unit(list(queries.values())) @ unit(list(corpus.values())).T
    doc_ids = list(corpus)
    run = {q: {doc_ids[j]: float(similarity[i, j]) for j in range(len(doc_ids))}
           for i, q in enumerate(queries)}
    per_query = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "recall.10", "map_cut.100"}).evaluate(run)
    for ours, theirs in (("ndcg@10", "ndcg_cut_10"), ("recall@10", "recall_10"),
                         ("map@100", "map_cut_100")):
        out[f"ir_dev_{ours}"] = float(np.mean([v[theirs] for v in per_query.values()]))
    return out


def main(out):
    from worker import _split_cpu
    from worker import make_batches
    from worker import make_data

    _split_cpu()
    import keras

    import keras_cosent
    from keras_cosent import distributed

    pairs, scores, queries, corpus, qrels = splits()
    x, y = make_data("cosent")

    epochs = []

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            epochs.append({"logs": {k: float(v) for k, v in logs.items() if "_" in k},
                           "weights": self.model.encoder.get_weights()})

    with distributed.data_parallel(2):
        encoder = make_encoder()
        model = keras_cosent.models.SiameseEncoder(encoder)
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05),
                      loss=keras_cosent.losses.CoSENTLoss(scale=20.0))
        callbacks = [
            # As the CLI passes it; the retrieval one finds the model's.
            keras_cosent.callbacks.SpearmanEvaluator(
                pairs, scores, name="sts_dev", encoder=encoder, batch_size=EVAL_BATCH,
                verbose=0),
            keras_cosent.callbacks.RetrievalEvaluator(
                queries, corpus, qrels, name="ir_dev", batch_size=EVAL_BATCH),
            Record(),
        ]
        model.fit(distributed.shard_batches(make_batches(x, y)), epochs=EPOCHS, shuffle=False,
                  verbose=0, callbacks=callbacks)

    single = make_encoder()  # outside any distribution: one device
    results = []
    for entry in epochs:
        single.set_weights(entry["weights"])
        sts = keras_cosent.callbacks.SpearmanEvaluator(
            pairs, scores, encoder=single, batch_size=EVAL_BATCH).evaluate()
        ir = keras_cosent.callbacks.RetrievalEvaluator(
            queries, corpus, qrels, encoder=single, batch_size=EVAL_BATCH).evaluate()
        results.append({
            "logs": entry["logs"],
            "single": {**{f"sts_dev_{k}": v for k, v in sts.items()},
                       **{f"ir_dev_{k}": v for k, v in ir.items()}},
            "reference": reference(single, pairs, scores, queries, corpus, qrels),
        })
    with open(os.path.join(out, f"rank{distributed.rank()}.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.dirname(os.path.dirname(here)))
    sys.path.insert(0, here)
    main(sys.argv[1])
