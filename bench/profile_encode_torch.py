"""Where PyTorch encoding time goes: keras-cosent's `encode` on the torch backend vs the peer.

Both stacks run in this one process, on the same torch and the same 2 cores:
sentence-transformers' `SentenceTransformer.encode` (batch 32, sorted by length)
and keras-cosent's `SentenceEncoder.encode` (packed rows, PyTorch backend), each over
the STS-B test sentences, once untimed and then once under `torch.profiler`. Prints
each stack's pass time, its top aten operators by self CPU time, and the rate of
its dense layers' matrix products (their FLOPs over the positions the stack
computes, over those operators' self time). Usage:

    .venv/bin/python bench/profile_encode_torch.py [--top 12]
"""

import argparse
import os
import sys
import time

os.environ["KERAS_BACKEND"] = "torch"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def profile(name, fn, top):
    import torch

    fn()  # warm-up: caches, lazy builds
    t0 = time.perf_counter()
    fn()
    plain = time.perf_counter() - t0
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    total = sum(e.self_cpu_time_total for e in events)
    products = sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS) / 1e6
    print(f"\n{name}: {plain:.2f} s per pass unprofiled; "
          f"aten self CPU {total / 1e6:.2f} s profiled")
    print(f"{'operator':<36}{'self s':>8}{'share':>8}{'calls':>8}")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]:
        print(f"{e.key:<36}{e.self_cpu_time_total / 1e6:>8.2f}"
              f"{e.self_cpu_time_total / total:>8.1%}{e.count:>8}")
    return plain, products


# The aten operators that run the dense layers' matrix products: the peer's `Linear`
# (`addmm`), Keras' `Dense` (`mm`) and `EinsumDense` (`bmm`, from `einsum`).
# Attention runs in `_scaled_dot_product_flash_attention_for_cpu` on both.
PRODUCTS = ("aten::addmm", "aten::mm", "aten::bmm")


def peer_positions(peer, sentences, batch_size):
    """Token positions `SentenceTransformer.encode` computes: batches in order of
    decreasing text length, each padded to its longest tokenised sentence."""
    import numpy as np

    lengths = [len(ids) for ids in peer.tokenizer(
        sentences, truncation=True, max_length=peer.max_seq_length)["input_ids"]]
    order = np.argsort([-len(s) for s in sentences])  # as `encode` sorts them
    chunks = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    return sum(max(lengths[i] for i in chunk) * len(chunk) for chunk in chunks)


def main():
    from bench.common import positive_int

    p = argparse.ArgumentParser(prog="python -m bench tool profile-encode-torch", description=__doc__.splitlines()[0])
    p.add_argument("--top", type=positive_int, default=12)
    p.add_argument("--batch-size", type=positive_int, default=32)
    args = p.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    import keras_cosent
    from bench.common import dense_flops
    from bench.common import minilm_path
    from bench.common import packed_pass_shapes
    from bench.common import read_sts_pairs

    t1, t2, _ = read_sts_pairs("test")
    sentences = list(t1) + list(t2)
    print(f"{len(sentences)} sentences, batch {args.batch_size}, "
          f"torch threads {torch.get_num_threads()}")

    peer = SentenceTransformer(minilm_path(), device="cpu")
    peer.max_seq_length = 64
    peer.eval()
    peer_s, peer_products = profile("peer (sentence-transformers)", lambda: peer.encode(
        sentences, batch_size=args.batch_size, normalize_embeddings=True,
        convert_to_numpy=True), args.top)

    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        minilm_path(), pooling="mean", max_length=64)
    keras_s, keras_products = profile("keras-cosent, torch backend (packed)", lambda: encoder.encode(
        sentences, batch_size=args.batch_size), args.top)
    print(f"\nkeras / peer speed: {peer_s / keras_s:.2f}x")

    config = encoder.backbone.get_config()
    packed = sum(rows * length for rows, length in
                 packed_pass_shapes(encoder, encoder.tokenize(sentences), args.batch_size))
    for name, positions, seconds in (("peer", peer_positions(peer, sentences, args.batch_size),
                                      peer_products),
                                     ("keras-cosent", packed, keras_products)):
        flops = dense_flops(positions, config)
        print(f"{name}: {positions} token positions, dense products {flops / 1e9:.0f} GFLOP "
              f"in {seconds:.2f} s of {', '.join(PRODUCTS)}: {flops / 1e9 / seconds:.0f} GFLOP/s")


if __name__ == "__main__":
    main()
