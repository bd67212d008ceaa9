"""Profile one timed training epoch of the keras stack with the backend's own profiler.

TensorFlow's and JAX's profilers both write an XSpace (`*.xplane.pb`); this
script runs the same set-up as `bench/stacks.py` (packaged all-MiniLM-L6-v2,
first `--pairs` STS-B train pairs, batch 16, CoSENT, the recipes' AdamW), one
warm-up epoch, then one epoch under the profiler, and prints the host events
that took the most time, summed by name over all threads, next to the epoch's
wall time. py-spy cannot see inside either runtime; this can.

    .venv/bin/python bench/profile_train.py --stack tensorflow --pairs 256
    .venv/bin/python bench/profile_train.py --stack jax --pairs 256

`--encode` profiles one steady-state `encode` pass over the 2,758 STS-B test
sentences (batch 32, as the harness times it) instead, after one untimed pass,
and adds the matrix products' share of the pass and their rate in GFLOP/s, from
the FLOPs of the packed rows the pass computes:

    .venv/bin/python bench/profile_train.py --stack jax --encode
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
    from bench.common import positive_int

    p = argparse.ArgumentParser(prog="python -m bench tool profile-train", description=__doc__.splitlines()[0])
    p.add_argument("--stack", required=True, choices=["tensorflow", "jax"])
    p.add_argument("--pairs", type=positive_int, default=256)
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--max-length", type=positive_int, default=64)
    p.add_argument("--top", type=positive_int, default=30)
    p.add_argument("--logdir", default=None, help="where to keep the trace (default: a temp dir)")
    p.add_argument("--encode", action="store_true",
                   help="profile an encode pass over the STS-B test sentences instead")
    p.add_argument("--encode-batch-size", type=positive_int, default=32)
    args = p.parse_args()
    from recipes.context import Environment

    Environment(args.stack).activate_backend()  # as keras-cosent and the harness start

    if args.encode:
        return profile_encode(args)
    from bench.common import keras_training_run

    _, model, batches = keras_training_run(args.pairs, args.batch_size, args.max_length)
    model.fit(batches, epochs=1, verbose=0, shuffle=False)

    start, stop, trace = profiler(args)
    start()
    t0 = time.perf_counter()
    model.fit(batches, epochs=1, verbose=0, shuffle=False)
    wall = time.perf_counter() - t0
    stop()
    path = trace()
    rows, threads, kinds = summarise(path, args.top)
    print(f"# {args.stack}: {len(batches)} steps, epoch wall {wall:.2f} s "
          f"({len(batches.dataset) / wall:.2f} pairs/s, {wall / len(batches) * 1000:.0f} ms/step); "
          f"trace {path}")
    print_tables(rows, threads, kinds, len(batches), "step")


def print_tables(rows, threads, kinds, count, unit):
    """The busiest threads, compiled instructions by kind and top events, in ms per `unit`."""
    print("# busiest threads (s of events, nested events counted again):")
    for name, seconds in threads:
        print(f"#   {seconds:8.2f}  {name}")
    print(f"# compiled instructions by kind (leaf XLA ops, ms per {unit}):")
    for kind, seconds in kinds:
        print(f"#   {seconds / count * 1000:8.1f}  {kind}")
    print(f"{'seconds':>9} {'ms/' + unit:>8} {'calls':>7}  "
          "event (summed over threads; nested events overlap)")
    for name, seconds, calls in rows:
        print(f"{seconds:9.3f} {seconds / count * 1000:8.1f} {calls:7d}  {name[:110]}")


def profiler(args):
    """start, stop and the path of the trace written, for the backend's own profiler."""
    logdir = args.logdir or tempfile.mkdtemp(prefix=f"profile-{args.stack}-")
    if args.stack == "tensorflow":
        import tensorflow as tf

        start, stop = (lambda: tf.profiler.experimental.start(logdir),
                       tf.profiler.experimental.stop)
    else:
        import jax

        start, stop = (lambda: jax.profiler.start_trace(logdir), jax.profiler.stop_trace)

    def trace():
        return sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))[-1]

    return start, stop, trace


# Kinds of compiled instruction that are matrix products: XLA's Eigen kernels on
# TensorFlow (`MatMul`, `dot`, `BatchMatMulV2`), YNNPACK fusions on JAX.
PRODUCT_KINDS = ("MatMul", "dot", "BatchMatMulV2", "ynn_fusion", "ynn-fusion")


def encode_product_flops(encoder, sentences, batch_size):
    """FLOPs of the matrix products in one packed `encode` pass (every computed slot)."""
    from bench.common import dense_flops, packed_pass_shapes

    cfg = encoder.backbone.get_config()
    token_lists = encoder.tokenize(sentences)
    rows = packed_pass_shapes(encoder, token_lists, batch_size)
    slots = sum(r * length for r, length in rows)
    # Attention's two products (scores, weighted values) within each row, every layer.
    attention = cfg["num_layers"] * sum(2 * 2 * r * length * length * cfg["hidden_dim"]
                                        for r, length in rows)
    return (dense_flops(slots, cfg) + attention, len(rows), slots,
            sum(len(t) for t in token_lists))


def profile_encode(args):
    from bench.common import minilm_path, read_sts_pairs
    import keras_cosent

    t1, t2, _ = read_sts_pairs("test")
    sentences = list(t1) + list(t2)
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        minilm_path(), pooling="mean", max_length=args.max_length)
    encoder.encode(sentences, batch_size=args.encode_batch_size)
    flops, passes, slots, tokens = encode_product_flops(encoder, sentences, args.encode_batch_size)
    start, stop, trace = profiler(args)
    start()
    t0 = time.perf_counter()
    encoder.encode(sentences, batch_size=args.encode_batch_size)
    wall = time.perf_counter() - t0
    stop()
    path = trace()
    rows, threads, kinds = summarise(path, args.top)
    products = sum(seconds for kind, seconds in kinds if kind in PRODUCT_KINDS)
    compiled = sum(seconds for _, seconds in kinds)
    print(f"# {args.stack} encode: {len(sentences)} sentences ({tokens} tokens) in {passes} "
          f"packed passes of {slots // passes} slots; pass wall {wall:.2f} s "
          f"({len(sentences) / wall:.1f} sent/s under the profiler); trace {path}")
    print(f"# matrix products ({', '.join(k for k in PRODUCT_KINDS)}): {products:.2f} s of events, "
          f"{flops / 1e9:.0f} GFLOP, {flops / 1e9 / max(products, 1e-9):.0f} GFLOP/s while in them; "
          f"all compiled instructions (top kinds) {compiled:.2f} s")
    print_tables(rows, threads, kinds, 1, "pass")


if __name__ == "__main__":
    main()
