"""TensorFlow train step: Keras' Philox dropout vs `recipes.xla_dropout`'s ThreeFry, one process.

Builds the speed harness's keras model twice (`bench/common.py`: packaged
all-MiniLM-L6-v2, CoSENT, the recipes' AdamW, the first `--pairs` STS-B train
pairs, batch 16), traces one with Keras' own dropout and one with
`use_threefry_dropout()` in place, then alternates one epoch of each for
`--rounds` rounds, so that drifts in machine load hit both alike, and prints
ms per step for each round and the medians. Separate processes (as in
`bench/speed.py`) differ by about 10% from run to run on this machine; this
does not.

    .venv/bin/python bench/xla_dropout_ab.py --pairs 256 --rounds 8
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=256)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64)
    args = p.parse_args()
    os.environ["KERAS_BACKEND"] = "tensorflow"

    from keras.src.backend.tensorflow import random as tf_random

    import recipes.xla_dropout
    from bench.common import keras_training_run

    models = {}
    for variant in ("philox", "threefry"):
        # keras_siamese, inside, installs the ThreeFry dropout.
        _, model, batches = keras_training_run(args.pairs, args.batch_size, args.max_length)
        models[variant] = (model, batches)
    dropout = {"philox": recipes.xla_dropout._ORIGINAL_DROPOUT,
               "threefry": recipes.xla_dropout._dropout}
    for variant, (model, batches) in models.items():
        tf_random.dropout = dropout[variant]
        t0 = time.perf_counter()
        model.fit(batches, epochs=1, verbose=0)  # traces and compiles every shape
        print(f"{variant:9s} warm-up {time.perf_counter() - t0:6.1f} s", flush=True)

    ms = {variant: [] for variant in models}
    for rnd in range(args.rounds):
        for variant, (model, batches) in models.items():
            tf_random.dropout = dropout[variant]  # in case a new shape is traced
            t0 = time.perf_counter()
            model.fit(batches, epochs=1, verbose=0)
            ms[variant].append((time.perf_counter() - t0) / len(batches) * 1000)
        print(f"round {rnd + 1}: " + "  ".join(f"{v} {ms[v][-1]:6.0f} ms/step" for v in ms),
              flush=True)
    medians = {v: statistics.median(t) for v, t in ms.items()}
    print("median ms/step: " + "  ".join(f"{v} {m:.0f}" for v, m in medians.items())
          + f"  (threefry/philox {medians['threefry'] / medians['philox']:.3f})")


if __name__ == "__main__":
    main()
