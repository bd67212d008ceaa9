"""Milliseconds per training step of one keras stack, epoch by epoch, in one process.

The speed harness's keras set-up (`bench/common.py`: packaged all-MiniLM-L6-v2,
CoSENT, the recipes' AdamW, the first `--pairs` STS-B train pairs, batch 16):
one warm-up epoch, then `--epochs` timed ones. Small enough to run under
`/usr/bin/time` or `strace -c` and see what the process costs the kernel, e.g.

    /usr/bin/time -f "%U s user, %S s system, %R minor faults, %M KiB peak" \
        .venv/bin/python bench/train_steps.py --stack tensorflow
    TF_CPU_ALLOCATOR_USE_BFC=false /usr/bin/time -f "..." \
        .venv/bin/python bench/train_steps.py --stack tensorflow
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stack", required=True, choices=["tensorflow", "jax", "torch"])
    p.add_argument("--pairs", type=int, default=256)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64)
    args = p.parse_args()
    os.environ["KERAS_BACKEND"] = args.stack

    from bench.common import keras_training_run

    _, model, batches = keras_training_run(args.pairs, args.batch_size, args.max_length)
    t0 = time.perf_counter()
    model.fit(batches, epochs=1, verbose=0)
    print(f"{args.stack}: warm-up {time.perf_counter() - t0:.1f} s", flush=True)
    ms = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        model.fit(batches, epochs=1, verbose=0)
        ms.append((time.perf_counter() - t0) / len(batches) * 1000)
    print(f"{args.stack}: ms/step per epoch " + " ".join(f"{x:.0f}" for x in ms)
          + f"; median {statistics.median(ms):.0f}"
          + f" (TF_CPU_ALLOCATOR_USE_BFC={os.environ.get('TF_CPU_ALLOCATOR_USE_BFC')})")


if __name__ == "__main__":
    main()
