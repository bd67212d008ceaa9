"""One timed run of one stack; prints a single JSON line. Called by bench/speed.py.

Stacks: `peer` (sentence-transformers on PyTorch, its own CoSENTLoss and AdamW,
tokenising each batch as its data collator does) and `tensorflow`/`jax`/`torch`
(keras-cosent through `model.fit` with the backend's default compilation and
the library's training set-up, `keras_cosent.training.build`).
Both train the packaged all-MiniLM-L6-v2 with CoSENT, AdamW lr 2e-5, on the same
first `--pairs` STS-B train pairs in the same order, batch `--batch-size`,
`--max-length` tokens. The peer pads each column of a batch to its longest
sentence; the keras stacks pack each batch's sentences into shared rows, as
`keras-cosent train` does (`--no-packing`: pad both columns to the batch's
longest sentence, rounded up to 8 on JAX/TensorFlow). The first
epoch is warm-up (compilation, caches) and reported separately; the second is timed.
Encoding speed is measured on the STS-B test sentences (both columns): a first
pass (which compiles one function per padded length on JAX/TensorFlow) is
reported separately, the second pass is the timed one.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_peer(args, s1, s2, labels, test_sentences):
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss

    from bench.common import minilm_path

    torch.manual_seed(args.seed)
    model = SentenceTransformer(minilm_path(), device="cpu")
    model.max_seq_length = args.max_length
    loss_fn = CoSENTLoss(model, scale=20.0)
    # What SentenceTransformerTrainer runs: transformers' TrainingArguments default to
    # optim="adamw_torch_fused" with torch >= 2.8 (the single-tensor CPU loop that
    # torch.optim.AdamW otherwise takes is 5-7x slower on this model's 22.6M parameters).
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, fused=True)
    bs = args.batch_size

    def epoch():
        model.train()
        for start in range(0, len(s1), bs):
            a, b = s1[start : start + bs], s2[start : start + bs]
            y = torch.tensor(labels[start : start + bs], dtype=torch.float32)
            features = [model.preprocess(a), model.preprocess(b)]
            loss = loss_fn(features, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
        return float(loss)

    t0 = time.perf_counter()
    epoch()
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    last_loss = epoch()
    timed = time.perf_counter() - t0

    model.eval()

    def encode():
        return model.encode(test_sentences, batch_size=args.encode_batch_size,
                            normalize_embeddings=True, convert_to_numpy=True)

    enc_first, enc, emb = time_encoding(encode)
    return warm, timed, enc_first, enc, last_loss, emb.shape


def time_encoding(encode):
    """Times a first pass over the test set (compilation included), then a second.

    Compiled stacks build one function per padded length the first time they see
    it; the second pass is the steady state, the first is reported beside it.
    """
    t0 = time.perf_counter()
    encode()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    emb = encode()
    return first, time.perf_counter() - t0, emb


def run_keras(args, s1, s2, labels, test_sentences):
    import keras

    import keras_cosent
    from bench.common import keras_training
    from bench.common import minilm_path

    keras.utils.set_random_seed(args.seed)
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        minilm_path(), pooling="mean", max_length=args.max_length)
    t0 = time.perf_counter()
    setup = keras_training(encoder, s1, s2, labels, args.batch_size, packing=args.packing)
    model, batches = setup.model, setup.batches
    tokenise = time.perf_counter() - t0

    t0 = time.perf_counter()
    model.fit(batches, epochs=1, verbose=0)
    warm = time.perf_counter() - t0 + tokenise
    t0 = time.perf_counter()
    hist = model.fit(batches, epochs=1, verbose=0)
    timed = time.perf_counter() - t0 + tokenise  # the peer tokenises inside its epoch
    enc_first, enc, emb = time_encoding(
        lambda: encoder.encode(test_sentences, batch_size=args.encode_batch_size))
    return warm, timed, enc_first, enc, float(hist.history["loss"][-1]), emb.shape


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stack", required=True, choices=["peer", "tensorflow", "jax", "torch"])
    p.add_argument("--pairs", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--encode-batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--packing", action=argparse.BooleanOptionalAction, default=True,
                   help="keras stacks: pack training batches into shared rows, as "
                        "`keras-cosent train` does (default), or pad them")
    p.add_argument("--tuning", action=argparse.BooleanOptionalAction, default=True,
                   help="keras stacks: the process-wide tuning `keras-cosent` applies "
                        "(`keras_cosent.runtime.enable()`), as users get it (default), or none")
    p.add_argument("--off", default="",
                   help="keras stacks: comma-separated `keras_cosent.runtime` pieces to turn "
                        "off again after enabling the rest (an A/B of one piece)")
    args = p.parse_args()
    if args.stack != "peer":
        # As `keras-cosent` does: KERAS_BACKEND and the runtime tuning before Keras runs.
        from recipes.context import Environment

        Environment(args.stack, tuning=args.tuning).activate_backend()
        if args.off:
            from keras_cosent import runtime

            runtime.disable(args.off.split(","))
    from bench.common import peak_rss_mib, read_sts_pairs

    s1, s2, labels = read_sts_pairs("train", limit=args.pairs)
    t1, t2, _ = read_sts_pairs("test")
    test_sentences = list(t1) + list(t2)
    runner = run_peer if args.stack == "peer" else run_keras
    warm, timed, enc_first, enc, loss, shape = runner(args, s1, s2, labels, test_sentences)
    print(json.dumps({
        "stack": args.stack,
        "pairs": len(s1),
        "warmup_s": round(warm, 2),
        "train_s": round(timed, 2),
        "train_pairs_per_s": round(len(s1) / timed, 2),
        "encode_sentences": len(test_sentences),
        "encode_s": round(enc, 2),
        "encode_sentences_per_s": round(len(test_sentences) / enc, 1),
        "encode_first_s": round(enc_first, 2),
        "encode_first_sentences_per_s": round(len(test_sentences) / enc_first, 1),
        "final_loss": round(loss, 4),
        "embedding_shape": list(shape),
        "peak_rss_mib": round(peak_rss_mib(), 0),
        "runtime": ({name: piece["on"] for name, piece in
                     sys.modules["keras_cosent.runtime"].active().items()}
                    if "keras_cosent.runtime" in sys.modules else {}),
    }), flush=True)


if __name__ == "__main__":
    main()
