"""Profile one timed training epoch of the keras stack with the backend's own profiler.

TensorFlow's and JAX's profilers both write an XSpace (`*.xplane.pb`); this
script runs the same set-up as `bench/speed_worker.py` (packaged all-MiniLM-L6-v2,
first `--pairs` STS-B train pairs, batch 16, CoSENT, the recipes' AdamW), one
warm-up epoch, then one epoch under the profiler, and prints the host events
that took the most time, summed by name over all threads, next to the epoch's
wall time. py-spy cannot see inside either runtime; this can.

    .venv/bin/python bench/profile_train.py --stack tensorflow --pairs 256
    .venv/bin/python bench/profile_train.py --stack jax --pairs 256
"""

import argparse
import collections
import glob
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


HLO_NAME = re.compile(r"^([A-Za-z_\-]+?)(?:\.\d+)+$")


def summarise(xplane_path, top):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as f:
        space.ParseFromString(f.read())
    totals = collections.Counter()
    counts = collections.Counter()
    threads = collections.Counter()
    kinds = collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                name = names.get(event.metadata_id, "?")
                totals[name] += event.duration_ps / 1e12
                counts[name] += 1
                threads[line.name or str(line.id)] += event.duration_ps / 1e12
                # Compiled (XLA) instructions are named like "MatMul.268" or
                # "ynn_fusion.101": group them by the part before the number.
                match = HLO_NAME.match(name)
                if match:
                    kinds[match.group(1)] += event.duration_ps / 1e12
    rows = [(name, seconds, counts[name]) for name, seconds in totals.most_common(top)]
    return rows, threads.most_common(8), kinds.most_common(15)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stack", required=True, choices=["tensorflow", "jax"])
    p.add_argument("--pairs", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--logdir", default=None, help="where to keep the trace (default: a temp dir)")
    args = p.parse_args()
    os.environ["KERAS_BACKEND"] = args.stack

    from bench.common import keras_training_run

    _, model, batches = keras_training_run(args.pairs, args.batch_size, args.max_length)
    model.fit(batches, epochs=1, verbose=0)

    logdir = args.logdir or tempfile.mkdtemp(prefix=f"profile-{args.stack}-")
    if args.stack == "tensorflow":
        import tensorflow as tf

        start, stop = (lambda: tf.profiler.experimental.start(logdir),
                       tf.profiler.experimental.stop)
    else:
        import jax

        start, stop = (lambda: jax.profiler.start_trace(logdir), jax.profiler.stop_trace)
    start()
    t0 = time.perf_counter()
    model.fit(batches, epochs=1, verbose=0)
    wall = time.perf_counter() - t0
    stop()
    paths = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
    rows, threads, kinds = summarise(paths[-1], args.top)
    print(f"# {args.stack}: {len(batches)} steps, epoch wall {wall:.2f} s "
          f"({len(batches.dataset) / wall:.2f} pairs/s, {wall / len(batches) * 1000:.0f} ms/step); "
          f"trace {paths[-1]}")
    print("# busiest threads (s of events, nested events counted again):")
    for name, seconds in threads:
        print(f"#   {seconds:8.2f}  {name}")
    print("# compiled instructions by kind (leaf XLA ops, ms per step):")
    for kind, seconds in kinds:
        print(f"#   {seconds / len(batches) * 1000:8.1f}  {kind}")
    print(f"{'seconds':>9} {'ms/step':>8} {'calls':>7}  event (summed over threads; nested events overlap)")
    for name, seconds, calls in rows:
        print(f"{seconds:9.3f} {seconds / len(batches) * 1000:8.1f} {calls:7d}  {name[:110]}")


if __name__ == "__main__":
    main()
