"""Exact top-k search time: `keras_cosent.retrieval.top_k` next to the peer's `semantic_search`.

The search behind `RetrievalEvaluator`, `keras-cosent evaluate --task retrieval`
and `keras-cosent mine` scores queries against the corpus in chunks and keeps
each query's k best. For each corpus size, on the same random unit vectors
(384 dimensions, all-MiniLM-L6-v2's width), this times:

- `keras-cosent`: `top_k` as it is now (NumPy; a chunk's columns that beat a
  query's running k-th best are found with one comparison and only those are
  sorted, the first chunk's k best are picked by partition);
  every NumPy method here runs `top_k`'s default chunks;
- `full-sort`: the previous form, which sorted every score of each chunk
  (`full_sort_top_k` below keeps it, verbatim, for the comparison; skipped
  above `--full-sort-limit` documents, where it takes minutes);
- `peer`: sentence-transformers' `util.semantic_search` (PyTorch, `torch.topk`
  per chunk, its default chunks of 100 queries x 500,000 documents);
- `faiss`: `top_k(use_faiss=True)`, an exact `faiss.IndexFlatIP`, when `faiss`
  imports;
- `products-only`: `top_k`'s normalisation and chunked matrix products with
  nothing selected, the floor of any exact search through BLAS.

After one untimed warm-up call each, rounds are interleaved (every method once
per round, in turn), each at the machine's default threads. Reported: the
median of the rounds' seconds, each round's ratio to the peer, and how many
queries get the same k documents in the same order as `keras-cosent` (exact
ties aside, the stacks' float32 sums can order two near-equal scores
differently).

    python -m bench tool search-speed --out bench/results/search-speed.jsonl
"""

import argparse
import importlib.metadata
import inspect
import statistics
import time

import numpy as np


def top_k_chunks():
    """`top_k`'s default `(query_chunk_size, chunk_size)`, which every method here uses."""
    from keras_cosent.retrieval import top_k

    defaults = inspect.signature(top_k).parameters
    return defaults["query_chunk_size"].default, defaults["chunk_size"].default


def full_sort_top_k(queries, corpus, k, chunk_size=None, query_chunk_size=None):
    """The previous `top_k`: every score of each chunk lexsorted with the running best."""
    default_queries, default_chunk = top_k_chunks()
    chunk_size = chunk_size or default_chunk
    query_chunk_size = query_chunk_size or default_queries
    k = min(int(k), corpus.shape[0])
    out_scores = np.empty((queries.shape[0], k), dtype=np.float32)
    out_index = np.empty((queries.shape[0], k), dtype=np.int64)
    for q0 in range(0, queries.shape[0], query_chunk_size):
        q = queries[q0 : q0 + query_chunk_size]
        best_scores = np.empty((q.shape[0], 0), dtype=np.float32)
        best_index = np.empty((q.shape[0], 0), dtype=np.int64)
        for c0 in range(0, corpus.shape[0], chunk_size):
            scores = q @ corpus[c0 : c0 + chunk_size].T
            index = np.broadcast_to(
                np.arange(c0, c0 + scores.shape[1], dtype=np.int64), scores.shape
            )
            all_scores = np.concatenate([best_scores, scores], axis=1)
            all_index = np.concatenate([best_index, index], axis=1)
            order = np.lexsort((all_index, -all_scores), axis=1)[:, :k]
            best_scores = np.take_along_axis(all_scores, order, axis=1)
            best_index = np.take_along_axis(all_index, order, axis=1)
        out_scores[q0 : q0 + q.shape[0]] = best_scores
        out_index[q0 : q0 + q.shape[0]] = best_index
    return out_scores, out_index


def unit_vectors(rows, dim, seed):
    x = np.random.default_rng(seed).standard_normal((rows, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def methods(full_sort):
    from keras_cosent.retrieval import top_k
    from keras_cosent.retrieval.search import _normalize
    from keras_cosent.retrieval.search import _normalized_chunks

    def ours(q, c, k):
        return top_k(q, c, k)[1]

    def previous(q, c, k):
        # Normalised as `top_k` normalises (float32), so the two score the same numbers.
        return full_sort_top_k(_normalize(q), _normalize(c), k)[1]

    def peer(q, c, k):
        import torch
        from sentence_transformers import util

        hits = util.semantic_search(torch.from_numpy(q), torch.from_numpy(c), top_k=k)
        return np.array([[hit["corpus_id"] for hit in row] for row in hits], dtype=np.int64)

    def products_only(q, c, k):
        # top_k's normalisation and chunked products, nothing selected: the floor.
        # In top_k's order: each corpus chunk normalised once, then every query chunk.
        q = _normalize(q)
        query_chunk, chunk = top_k_chunks()
        for _, block in _normalized_chunks(c, chunk):
            for q0 in range(0, q.shape[0], query_chunk):
                q[q0 : q0 + query_chunk] @ block.T
        return None

    def with_faiss(q, c, k):
        return top_k(q, c, k, use_faiss=True)[1]

    found = {"keras-cosent": ours, "peer": peer, "products-only": products_only}
    if full_sort:
        found["full-sort"] = previous
    try:
        import faiss  # noqa: F401

        found["faiss"] = with_faiss
    except ImportError:
        pass
    return found


def measure(num_queries, corpus_size, dim, k, rounds, full_sort_limit, seed=0):
    queries = unit_vectors(num_queries, dim, seed)
    corpus = unit_vectors(corpus_size, dim, seed + 1)
    runs = methods(corpus_size <= full_sort_limit)
    for run in runs.values():  # warm-up: imports, thread pools, first-call costs
        run(queries[:8], corpus[: 4 * k], k)
    seconds = {name: [] for name in runs}
    results = {}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            results[name] = run(queries, corpus, k)
            seconds[name].append(time.perf_counter() - start)
    ours = results["keras-cosent"]
    rows = []
    for name in runs:
        row = {"method": name, "queries": num_queries, "corpus": corpus_size, "dim": dim,
               "k": k, "seconds": seconds[name],
               "median_s": statistics.median(seconds[name]),
               "same_as_keras_cosent": None if results[name] is None else
               int(np.sum(np.all(results[name] == ours, axis=1)))}
        if name != "peer":
            row["ratio_to_peer"] = [a / b for a, b in zip(seconds[name], seconds["peer"])]
        rows.append(row)
    return rows


def table(rows):
    lines = ["| documents | method | median s | ratio to the peer (per round) "
             "| queries with keras-cosent's exact top-k |",
             "|---:|---|---:|---|---:|"]
    for row in rows:
        ratios = row.get("ratio_to_peer")
        ratio = "" if ratios is None else (
            f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        same = row["same_as_keras_cosent"]
        same = "" if same is None else f"{same} / {row['queries']}"
        lines.append(f"| {row['corpus']:,} | {row['method']} | {row['median_s']:.3g} | {ratio} "
                     f"| {same} |")
    return "\n".join(lines)


def main():
    from bench.common import positive_int, positive_int_list

    p = argparse.ArgumentParser(prog="python -m bench tool search-speed", description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=positive_int, default=1000)
    p.add_argument("--corpus-sizes", default="10000,100000,1000000", type=positive_int_list,
                   help="comma-separated corpus sizes")
    p.add_argument("--dim", type=positive_int, default=384)
    p.add_argument("--k", type=positive_int, default=100,
                   help="results per query (100: RetrievalEvaluator's MAP@100)")
    p.add_argument("--rounds", type=positive_int, default=3)
    p.add_argument("--full-sort-limit", type=positive_int, default=100000,
                   help="time the previous full-sort form only up to this many documents")
    p.add_argument("--out", required=True,
                   help="JSON lines, written when every size is measured (until then to "
                   "OUT.partial)")
    args = p.parse_args()
    sizes = args.corpus_sizes
    from bench import harness

    context = {"machine": harness.machine(), "versions": harness.versions(),
               "git": harness.git_state()}
    for package in ("numpy", "faiss-cpu"):
        try:
            context["versions"][package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            context["versions"][package] = None
    rows = []
    for size in sizes:
        rows.extend({**row, **context} for row in measure(
            args.queries, size, args.dim, args.k, args.rounds, args.full_sort_limit))
        harness.write_results(args.out, harness.jsonl(rows),
                              complete=size == sizes[-1])
        print(table([r for r in rows if r["corpus"] == size]), flush=True)
    print()
    print(table(rows))


if __name__ == "__main__":
    main()
