"""Encoding speed of one keras stack in a fresh process, then after one `fit` epoch.

Found TensorFlow's plain-graph predict running ~40% slower once `fit` had run
(BENCHMARKS.md, run F), and checks the XLA predict function that fixed it. Usage:

    KERAS_BACKEND=tensorflow .venv/bin/python bench/encode_after_fit.py [--jit-compile false]

Prints one JSON line: seconds per encoding pass over the STS-B test sentences
(both columns, batch 32), before and after training on `--pairs` train pairs.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=256)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--jit-compile", choices=["default", "true", "false"], default="default",
                   help="the encoder's jit_compile (default: the library's)")
    p.add_argument("--packing", choices=["auto", "off"], default="auto",
                   help="encode's `packing` (auto: the library's default, packed rows on BERT)")
    args = p.parse_args()

    import keras

    import keras_cosent
    from bench.common import keras_training
    from bench.common import minilm_path
    from bench.common import read_sts_pairs

    t1, t2, _ = read_sts_pairs("test")
    sentences = list(t1) + list(t2)
    s1, s2, labels = read_sts_pairs("train", limit=args.pairs)
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        minilm_path(), pooling="mean", max_length=64)
    if args.jit_compile != "default":
        encoder.jit_compile = args.jit_compile == "true"
    result = {"backend": keras.backend.backend(), "jit_compile": encoder.jit_compile,
              "packing": args.packing}

    def passes(tag):
        for i in range(args.passes):
            t0 = time.perf_counter()
            encoder.encode(sentences, batch_size=32,
                           packing=None if args.packing == "auto" else False)
            result[f"{tag}_pass{i + 1}_s"] = round(time.perf_counter() - t0, 2)

    passes("fresh")
    setup = keras_training(encoder, s1, s2, labels, batch_size=16)
    model, batches = setup.model, setup.batches
    t0 = time.perf_counter()
    model.fit(batches, epochs=1, verbose=0)
    result["fit_s"] = round(time.perf_counter() - t0, 1)
    passes("after_fit")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
