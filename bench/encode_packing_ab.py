"""Packed vs padded `encode` in one process: the STS-B test sentences, alternating.

Separate processes differ by 10% or more run to run on this machine, so the two
paths of `SentenceEncoder.encode` (`packing=True`, rows with a block-diagonal
mask; `packing=False`, length-sorted batches padded to their longest) run in
turn in one process, after one untimed pass each (compilation). Also reports
the first pass of each (what a one-off `keras-cosent encode` pays), the padding
each wastes, and the largest difference between their embeddings. Usage:

    KERAS_BACKEND=jax .venv/bin/python bench/encode_packing_ab.py --rounds 4

Prints one JSON line.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=64)
    args = p.parse_args()

    import keras
    import numpy as np

    import keras_cosent
    from bench.common import minilm_path
    from bench.common import packed_pass_shapes
    from bench.common import read_sts_pairs

    s1, s2, _ = read_sts_pairs("test")
    sentences = list(s1) + list(s2)
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        minilm_path(), pooling="mean", max_length=args.max_length)

    def run(packing):
        t0 = time.perf_counter()
        out = encoder.encode(sentences, batch_size=args.batch_size, packing=packing)
        return time.perf_counter() - t0, out

    first = {}
    emb = {}
    for packing in (True, False):
        first[packing], emb[packing] = run(packing)
    timed = {True: [], False: []}
    for rnd in range(args.rounds):
        for packing in ((True, False) if rnd % 2 == 0 else (False, True)):
            timed[packing].append(run(packing)[0])

    # Token slots each path computes (the layouts `encode` itself builds), against
    # the tokens the sentences hold.
    token_lists = encoder.tokenize(sentences)
    lengths = np.array([len(ids) for ids in token_lists])
    padded_slots = sum(
        inputs["token_ids"].size
        for inputs, _ in encoder._padded_batches(token_lists, args.batch_size))
    shapes = packed_pass_shapes(encoder, token_lists, args.batch_size)
    packed_slots = sum(rows * length for rows, length in shapes)
    n = len(sentences)
    print(json.dumps({
        "backend": keras.backend.backend(),
        "sentences": n,
        "rounds": args.rounds,
        "packed_sentences_per_s": round(n / statistics.median(timed[True]), 1),
        "padded_sentences_per_s": round(n / statistics.median(timed[False]), 1),
        "packed_over_padded": round(
            statistics.median(timed[False]) / statistics.median(timed[True]), 3),
        "packed_s": [round(t, 3) for t in timed[True]],
        "padded_s": [round(t, 3) for t in timed[False]],
        "first_pass_packed_s": round(first[True], 2),
        "first_pass_padded_s": round(first[False], 2),
        "tokens": int(lengths.sum()),
        "padded_token_slots": int(padded_slots),
        "packed_token_slots": int(packed_slots),
        "packed_shape": list(shapes[0]),
        "packed_passes": len(shapes),
        "max_abs_difference": float(np.abs(emb[True] - emb[False]).max()),
    }))


if __name__ == "__main__":
    main()
