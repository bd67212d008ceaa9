"""How close can a 2-core CPU get? Peak matmul rate vs the model's FLOPs per pair.

Measures the float32 matrix-multiply rate of NumPy and of each framework on this
machine (the ceiling for a transformer, whose work is almost all matmuls), counts
the FLOPs of one CoSENT training pair and one encoded sentence of the packaged
all-MiniLM-L6-v2 at the STS-B sentences' own lengths (the useful work, which no
layout goes below; since the keras stacks pack, they compute fewer padding
positions than a padded layout, so padded lengths would no longer bound them),
and so the most train pairs and encoded sentences per second the machine could
reach. A stack's share of that ceiling is its pairs (or sentences) per second
from `python -m bench report bench/results/speed.jsonl`, divided by the ceiling.

    .venv/bin/python -m bench tool machine-limit
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rate(fn, n, repeats=10):
    fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return 2 * n**3 * repeats / (time.perf_counter() - t0)


def matmul_rates(n=1024):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    rates = {"numpy": _rate(lambda: a @ b, n)}
    import torch

    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    rates["torch"] = _rate(lambda: ta @ tb, n)
    import jax
    import jax.numpy as jnp

    ja, jb = jnp.asarray(a), jnp.asarray(b)
    mm = jax.jit(lambda x, y: x @ y)
    rates["jax"] = _rate(lambda: mm(ja, jb).block_until_ready(), n)
    import tensorflow as tf

    fa, fb = tf.constant(a), tf.constant(b)
    rates["tensorflow"] = _rate(lambda: tf.linalg.matmul(fa, fb).numpy(), n)
    return rates


def forward_flops(tokens, layers=6, hidden=384, intermediate=1536):
    """Multiply-add FLOPs (x2) of one BERT forward over one sequence of `tokens`."""
    per_layer = 2 * tokens * (4 * hidden * hidden + 2 * hidden * intermediate)
    per_layer += 2 * 2 * tokens * tokens * hidden  # QK^T and attention x V
    return layers * per_layer


def token_counts(max_length=64, limit=None):
    """Each sentence's own token count: the first `limit` STS-B train pairs' two
    columns `(n1, n2)`, and the STS-B test sentences, one tokenisation of each."""
    from keras_hub.models import BertTokenizer

    from bench.common import minilm_path, read_sts_pairs

    tok = BertTokenizer.from_preset(minilm_path())

    def counts(sentences):
        return [min(len(ids) + 2, max_length) for ids in tok(list(sentences))]

    s1, s2, _ = read_sts_pairs("train", limit=limit)
    t1, t2, _ = read_sts_pairs("test")
    return counts(s1), counts(s2), counts(list(t1) + list(t2))


def padded_lengths(n1, n2, batch_size=16, max_length=64, multiple=1):
    """Padded length of each training sentence as PairBatches pads it.

    Both columns of a batch share one length: the batch's longest sentence,
    rounded up to `multiple` (8 on JAX/TensorFlow, 1 on PyTorch; the peer pads
    each column to its own longest, unrounded, so even multiple=1 slightly
    overstates the peer's work).
    """
    from keras_cosent.data.padding import padded_length

    lengths = []
    for start in range(0, len(n1), batch_size):
        chunk = n1[start : start + batch_size] + n2[start : start + batch_size]
        lengths.extend([padded_length(max(chunk), multiple, max_length)] * len(chunk))
    return np.array(lengths)


def encode_lengths(counts, batch_size=32, max_length=64, multiple=1):
    """Padded length of each STS-B test sentence in length-sorted batches.

    `encode(packing=False)`'s layout; `encode`'s default packed rows compute fewer
    token slots (README, "Using the library").
    """
    from keras_cosent.data.padding import padded_length

    n = sorted(counts, reverse=True)
    lengths = []
    for start in range(0, len(n), batch_size):
        chunk = n[start : start + batch_size]
        lengths.extend([padded_length(max(chunk), multiple, max_length)] * len(chunk))
    return np.array(lengths)


def main():
    from bench.common import positive_int

    p = argparse.ArgumentParser(prog="python -m bench tool machine-limit", description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=positive_int, default=512,
                   help="training pairs to count lengths over (the speed suite's default)")
    args = p.parse_args()
    rates = matmul_rates()
    peak = max(rates.values())
    for k, v in rates.items():
        print(f"matmul float32 1024^3 {k:<11} {v / 1e9:7.1f} GFLOP/s")
    # The work counted is the useful work: every sentence at its own length, which
    # packed rows come closest to (README, "Using the library": 1.10-1.16x the real
    # tokens of STS-B train in batches of 16). Padded layouts (the peer's, and
    # `packing=False`) do more; shown for reference.
    n1, n2, test_counts = token_counts(limit=args.pairs)
    lens = np.array(n1 + n2)
    fwd = np.mean([forward_flops(t) for t in lens])
    train_pair = 2 * 3 * fwd  # two sentences; backward ~ 2x forward
    padded = padded_lengths(n1, n2)
    lens8 = padded_lengths(n1, n2, multiple=8)
    print(f"train: mean length {lens.mean():.1f} tokens (padded per batch: {padded.mean():.1f}, "
          f"x8: {lens8.mean():.1f}); forward {fwd / 1e9:.2f} GFLOP/sentence; "
          f"train {train_pair / 1e9:.2f} GFLOP/pair")
    enc_lens = np.array(test_counts)
    enc_fwd = np.mean([forward_flops(t) for t in enc_lens])
    enc_lens8 = encode_lengths(test_counts, multiple=8)
    print(f"encode: mean length {enc_lens.mean():.1f} tokens (padded x8: {enc_lens8.mean():.1f}); "
          f"{enc_fwd / 1e9:.2f} GFLOP/sentence")
    print(f"ceiling at {peak / 1e9:.0f} GFLOP/s: {peak / train_pair:.1f} train pairs/s, "
          f"{peak / enc_fwd:.0f} encoded sentences/s")
    out = {"matmul_flops": rates, "train_flops_per_pair": train_pair,
           "forward_flops_per_sentence": fwd, "encode_flops_per_sentence": enc_fwd}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
