"""Milliseconds per training step of one keras stack, epoch by epoch, in one process.

The speed harness's keras set-up (`bench/common.py`: packaged all-MiniLM-L6-v2,
CoSENT, the recipes' AdamW, the first `--pairs` STS-B train pairs, batch 16):
one warm-up epoch, then `--epochs` timed ones. Small enough to run under
`/usr/bin/time` or `strace -c` and see what the process costs the kernel, e.g.

    /usr/bin/time -f "%U s user, %S s system, %R minor faults, %M KiB peak" \
        .venv/bin/python -m bench tool train-steps --stack tensorflow
    /usr/bin/time -f "..." \
        .venv/bin/python -m bench tool train-steps --stack tensorflow --off tf_bfc_allocator

It also prints, per epoch, the seconds between the last step's end and `fit`'s
return: on TensorFlow with tf.data autotuning left on (`--off tf_data_autotune_off`,
Keras' default), the old iterator's destructor can hold an epoch there until
its autotuning thread wakes (`keras_cosent.runtime`):

    .venv/bin/python -m bench tool train-steps --stack tensorflow --epochs 12 --off tf_data_autotune_off
    .venv/bin/python -m bench tool train-steps --stack tensorflow --epochs 12

and on JAX, glibc keeping freed memory (`glibc_pool`, as `keras-cosent` sets it)
against its default of mapping large blocks afresh:

    /usr/bin/time -f "..." .venv/bin/python -m bench tool train-steps --stack jax --pairs 512 --epochs 3
    /usr/bin/time -f "..." .venv/bin/python -m bench tool train-steps --stack jax --pairs 512 --epochs 3 \
        --off glibc_pool

and on PyTorch, what a fixed glibc mmap threshold would cost a whole uncached step
(why `glibc_mmap_threshold` fixes it only while a cached step embeds):

    /usr/bin/time -f "..." .venv/bin/python -m bench tool train-steps --stack torch --pairs 256 --epochs 3
    MALLOC_MMAP_THRESHOLD_=65536 /usr/bin/time -f "..." \
        .venv/bin/python -m bench tool train-steps --stack torch --pairs 256 --epochs 3
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    from bench.common import positive_int

    p = argparse.ArgumentParser(prog="python -m bench tool train-steps", description=__doc__.splitlines()[0])
    p.add_argument("--stack", required=True, choices=["tensorflow", "jax", "torch"])
    p.add_argument("--pairs", type=positive_int, default=256)
    p.add_argument("--epochs", type=positive_int, default=4)
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--max-length", type=positive_int, default=64)
    p.add_argument("--off", default="",
                   help="comma-separated `keras_cosent.runtime` pieces to leave off "
                        "(e.g. tf_data_autotune_off,glibc_pool); the rest are on, as "
                        "`keras-cosent` sets them")
    args = p.parse_args()
    from bench.toggles import NAMES

    off = [name for name in args.off.split(",") if name]
    unknown = [name for name in off if name not in NAMES]
    if unknown:
        # Before the backend starts: a traceback once it had, as --toggle does not.
        p.error(f"--off {args.off!r}: unknown {unknown}; expected names from {list(NAMES)}")
    from recipes.context import Environment

    Environment(args.stack).activate_backend()
    from keras_cosent import runtime

    if off:
        runtime.disable(off)
    import keras

    from bench.common import keras_training_run

    _, model, batches = keras_training_run(args.pairs, args.batch_size, args.max_length)

    class LastStep(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            self.at = time.perf_counter()

    last = LastStep()
    t0 = time.perf_counter()
    model.fit(batches, epochs=1, verbose=0, shuffle=False)
    print(f"{args.stack}: warm-up {time.perf_counter() - t0:.1f} s", flush=True)
    ms, tails = [], []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        model.fit(batches, epochs=1, verbose=0, shuffle=False, callbacks=[last])
        t1 = time.perf_counter()
        ms.append((t1 - t0) / len(batches) * 1000)
        tails.append(t1 - last.at)
    print(f"{args.stack}: ms/step per epoch " + " ".join(f"{x:.0f}" for x in ms)
          + f"; median {statistics.median(ms):.0f}"
          + " (runtime: " + ", ".join(f"{name} {'on' if piece['on'] else 'off'}"
                                      for name, piece in runtime.active().items()) + ")")
    print(f"{args.stack}: s from the last step to fit's return " + " ".join(f"{x:.2f}" for x in tails)
          + f"; epochs with more than 0.5 s: {sum(x > 0.5 for x in tails)} of {len(tails)}")


if __name__ == "__main__":
    main()
