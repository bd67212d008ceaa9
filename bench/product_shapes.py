"""GFLOP/s of the dense products of a packed MiniLM `encode` pass, per library, in one process.

A packed pass of the harness' encode (2,758 STS-B test sentences, batch 32) holds
432 token positions on JAX/TensorFlow (9 rows of 48), and every MiniLM layer
multiplies them by a 384x384 matrix four times (Q, K, V, output), by 384x1536
and by 1536x384. This times those three float32 products, with the bias added as
the layers add it, in each library's compiled form (JAX `jit`, TensorFlow
`tf.function(jit_compile=True)`, i.e. XLA as Keras runs them) and in PyTorch's
`addmm` (what sentence-transformers' `Linear` runs), taking turns round by round
so that a change in machine speed hits all of them alike. Prints the median
GFLOP/s of each, and the layer's mix (4 + 1 + 1 products) as one figure.

    .venv/bin/python bench/product_shapes.py --rounds 5
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def shapes(rows, hidden=384, inner=1536):
    """(name, m, k, n, count per layer) of the dense products."""
    return [("qkvo", rows, hidden, hidden, 4), ("ffn_in", rows, hidden, inner, 1),
            ("ffn_out", rows, inner, hidden, 1)]


def make_runners(m, k, n):
    import jax
    import jax.numpy as jnp
    import numpy as np
    import tensorflow as tf
    import torch

    rng = np.random.default_rng(0)
    x = rng.normal(size=(m, k)).astype("float32")
    w = (rng.normal(size=(k, n)) / np.sqrt(k)).astype("float32")
    b = rng.normal(size=(n,)).astype("float32")

    jx, jw, jb = jnp.asarray(x), jnp.asarray(w), jnp.asarray(b)
    jax_fn = jax.jit(lambda x, w, b: x @ w + b)

    tx, tw, tb = tf.constant(x), tf.constant(w), tf.constant(b)
    tf_fn = tf.function(lambda x, w, b: tf.matmul(x, w) + b, jit_compile=True)

    px, pw, pb = torch.from_numpy(x), torch.from_numpy(w.T.copy()), torch.from_numpy(b)

    def torch_fn():
        with torch.no_grad():
            return torch.nn.functional.linear(px, pw, pb)

    reference = x @ w + b
    runners = {
        "jax (XLA)": lambda: jax_fn(jx, jw, jb).block_until_ready(),
        "tensorflow (XLA)": lambda: tf_fn(tx, tw, tb).numpy(),
        "torch (addmm)": torch_fn,
    }
    for name, fn in runners.items():
        out = np.asarray(fn())
        if not np.allclose(out, reference, atol=1e-3, rtol=1e-3):
            raise SystemExit(f"{name}: wrong product for {m}x{k} @ {k}x{n}")
    return runners


def rate(fn, flops, seconds=0.3):
    fn()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    return flops * calls / (time.perf_counter() - t0) / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=432, help="token positions per pass")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()

    import torch

    print(f"{args.rows} positions per pass; torch threads {torch.get_num_threads()}")
    table = {}
    runners = {s[0]: make_runners(*s[1:4]) for s in shapes(args.rows)}
    for _ in range(args.rounds):
        for name, m, k, n, _count in shapes(args.rows):
            for lib, fn in runners[name].items():
                table.setdefault((lib, name), []).append(rate(fn, 2 * m * k * n))
    libs = list(next(iter(runners.values())))
    print(f"{'library':<18}" + "".join(f"{s[0] + f' {s[2]}x{s[3]}':>18}" for s in shapes(args.rows))
          + f"{'layer mix':>12}")
    for lib in libs:
        medians = [statistics.median(table[(lib, s[0])]) for s in shapes(args.rows)]
        # The layer's products in sequence: total FLOPs over total time.
        flops = [2 * m * k * n * count for _, m, k, n, count in shapes(args.rows)]
        mix = sum(flops) / sum(f / r for f, r in zip(flops, medians))
        print(f"{lib:<18}" + "".join(f"{r:18.0f}" for r in medians) + f"{mix:12.0f}")
    print("GFLOP/s, medians of", args.rounds, "rounds")


if __name__ == "__main__":
    main()
