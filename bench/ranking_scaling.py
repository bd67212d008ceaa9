"""Time and memory of the CoSENT ranking (loss + gradient): B x B matrix form vs sorted form.

`keras_cosent.losses.cosent_loss.ranking_loss_from_similarity` sorts the batch by
label and sums cumulative log-sum-exps; before, it built the matrix of all
`B**2` pair differences (`matrix_ranking_loss` below keeps that form, verbatim,
for the comparison). For each batch size B of cosines, this measures on JAX
(`jax.jit(jax.value_and_grad(...))`, the way a JAX training step runs it):

- seconds per call, the median of `--repeats` calls after a warm-up;
- the temporary memory XLA plans for the compiled call (`memory_analysis()`:
  the exact peak of its intermediate buffers, inputs and outputs excluded), and
  the process's peak RSS growth while running it (measured, noisier);
- the largest relative difference between the two forms' values and gradients
  where both run.

Each (form, B) runs in a fresh process, so that one peak RSS does not hide the
next. The matrix form is skipped above `--matrix-limit-gib`: first by the
estimate `4 arrays x B**2 x 4 bytes`, then by XLA's plan before running.
Labels are STS-like scores 0 to 5 in steps of 0.2 (26 levels: many ties).

    python -m bench tool ranking-scaling --out bench/results/loglinear-ranking.jsonl \\
        --plot bench/results/loglinear-ranking.png
"""

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_SIZES = "256,512,1024,2048,4096,8192,16384,32768,65536"


def matrix_ranking_loss(y_true, similarity, scale=20.0):
    """The B x B matrix form of the CoSENT ranking, as the library had it."""
    from keras import ops

    similarity = ops.cast(similarity, "float32")
    labels = ops.cast(ops.reshape(y_true, (-1,)), "float32")
    scaled = similarity * scale
    differences = scaled[None, :] - scaled[:, None]
    ordered = labels[:, None] > labels[None, :]
    differences = ops.where(ordered, differences, ops.full_like(differences, float("-inf")))
    terms = ops.concatenate(
        [ops.zeros((1,), dtype="float32"), ops.reshape(differences, (-1,))], axis=0
    )
    return ops.logsumexp(terms)


def inputs(batch, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    labels = (rng.integers(0, 26, batch) / 5.0).astype("float32")
    cosines = rng.uniform(-1.0, 1.0, batch).astype("float32")
    return labels, cosines


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure_one(form, batch, repeats, scale, limit_bytes):
    """One (form, batch) in this process: a JSON-able dict."""
    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    import numpy as np

    from keras_cosent.losses.cosent_loss import ranking_loss_from_similarity

    loss = matrix_ranking_loss if form == "matrix" else ranking_loss_from_similarity
    labels, cosines = inputs(batch)
    step = jax.jit(jax.value_and_grad(lambda c, y: loss(y, c, scale=scale)))
    start = time.perf_counter()
    compiled = step.lower(cosines, labels).compile()
    compile_s = time.perf_counter() - start
    planned = compiled.memory_analysis().temp_size_in_bytes
    row = {"form": form, "batch": batch, "backend": "jax", "scale": scale,
           "compile_s": round(compile_s, 3), "xla_temp_bytes": int(planned)}
    if planned > limit_bytes:
        row["skipped"] = f"XLA plans {planned / 2**30:.1f} GiB > limit"
        return row
    rss_before = peak_rss_bytes()
    value, grad = compiled(cosines, labels)
    jax.block_until_ready(grad)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(cosines, labels))
        times.append(time.perf_counter() - start)
    row.update(seconds=float(np.median(times)), seconds_min=float(min(times)),
               rss_growth_bytes=int(peak_rss_bytes() - rss_before), loss=float(value))
    if form == "matrix":
        # Check the sorted form against this one, from the same process.
        s_value, s_grad = jax.jit(jax.value_and_grad(
            lambda c, y: ranking_loss_from_similarity(y, c, scale=scale)))(cosines, labels)
        grad, s_grad = np.asarray(grad, "float64"), np.asarray(s_grad, "float64")
        row["sorted_value_rel_diff"] = abs(float(s_value) - float(value)) / abs(float(value))
        row["sorted_grad_rel_diff"] = float(np.abs(s_grad - grad).max() / np.abs(grad).max())
    return row


def run_all(sizes, repeats, scale, limit_gib):
    limit = int(limit_gib * 2**30)
    rows = []
    for batch in sizes:
        for form in ("matrix", "sorted"):
            if form == "matrix" and 4 * batch * batch * 4 > limit:
                rows.append({"form": form, "batch": batch, "backend": "jax", "scale": scale,
                             "skipped": f"estimate 4 x B^2 x 4 bytes > {limit_gib} GiB"})
                print(json.dumps(rows[-1]), flush=True)
                continue
            command = [sys.executable, "-m", "bench.ranking_scaling", "--one", form,
                       str(batch), "--repeats", str(repeats), "--scale", str(scale),
                       "--matrix-limit-gib", str(limit_gib)]
            done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True,
                                  env={**os.environ, "KERAS_BACKEND": "jax"})
            if done.returncode != 0:
                raise SystemExit(f"{form} B={batch} failed:\n{done.stderr[-3000:]}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def table(rows):
    """Markdown table: one line per batch size, both forms side by side."""
    by = {(r["form"], r["batch"]): r for r in rows}
    lines = ["| B | matrix s (median / fastest) | sorted s (median / fastest) "
             "| matrix XLA temp MiB | sorted XLA temp MiB "
             "| matrix RSS growth MiB | sorted RSS growth MiB | value / grad rel. diff |",
             "|---|---|---|---|---|---|---|---|"]

    def cell(row, key, scale=1.0, fmt="{:.4g}"):
        if row is None or key not in row:
            return "-" if row is None or "skipped" not in row else "skipped"
        return fmt.format(row[key] / scale)

    for batch in sorted({r["batch"] for r in rows}):
        m, s = by.get(("matrix", batch)), by.get(("sorted", batch))
        diff = "-"
        if m is not None and "sorted_value_rel_diff" in m:
            diff = f"{m['sorted_value_rel_diff']:.1e} / {m['sorted_grad_rel_diff']:.1e}"
        lines.append(
            f"| {batch} | {cell(m, 'seconds')} / {cell(m, 'seconds_min')} "
            f"| {cell(s, 'seconds')} / {cell(s, 'seconds_min')} "
            f"| {cell(m, 'xla_temp_bytes', 2**20, '{:.1f}')} "
            f"| {cell(s, 'xla_temp_bytes', 2**20, '{:.2f}')} "
            f"| {cell(m, 'rss_growth_bytes', 2**20, '{:.0f}')} "
            f"| {cell(s, 'rss_growth_bytes', 2**20, '{:.0f}')} | {diff} |"
        )
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for form, marker in (("matrix", "s"), ("sorted", "o")):
        done = sorted((r for r in rows if r["form"] == form and "seconds" in r),
                      key=lambda r: r["batch"])
        batches = [r["batch"] for r in done]
        left.plot(batches, [r["seconds_min"] * 1e3 for r in done], marker=marker, label=form)
        right.plot(batches, [max(r["xla_temp_bytes"], 1) / 2**20 for r in done],
                   marker=marker, label=form)
    for axis, label in ((left, "ms per loss + gradient (fastest call)"), (right, "XLA temporary memory (MiB)")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("batch size B (cosines)")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    fig.suptitle("CoSENT ranking on JAX (jit, CPU): B x B matrix vs sorted cumulative log-sum-exp")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    from bench.common import positive_float, positive_int, positive_int_list

    p = argparse.ArgumentParser(prog="python -m bench tool ranking-scaling", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES, type=positive_int_list,
                   help="comma-separated batch sizes")
    p.add_argument("--repeats", type=positive_int, default=5, help="timed calls per size (median)")
    p.add_argument("--scale", type=positive_float, default=20.0)
    p.add_argument("--matrix-limit-gib", type=positive_float, default=4.0,
                   help="skip the matrix form when it would need more than this")
    p.add_argument("--out", help="JSON lines of the measurements (needed unless --from-jsonl)")
    p.add_argument("--plot", help="the plot (default: --out with .png)")
    p.add_argument("--from-jsonl", default=None,
                   help="redraw the table and plot from an earlier --out file, measuring nothing")
    p.add_argument("--one", nargs=2, metavar=("FORM", "B"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        form, batch = args.one
        if form not in ("matrix", "sorted"):
            raise SystemExit(f"--one: form should be matrix or sorted, got {form!r}")
        row = measure_one(form, int(batch), args.repeats, args.scale,
                          int(args.matrix_limit_gib * 2**30))
        print(json.dumps(row))
        return
    if not args.from_jsonl and not args.out:
        p.error("--out is required (or --from-jsonl to redraw an earlier file)")
    plot_path = args.plot or str(pathlib.Path(args.out or args.from_jsonl).with_suffix(".png"))
    if args.from_jsonl:
        with open(args.from_jsonl) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    else:
        rows = run_all(args.sizes, args.repeats, args.scale, args.matrix_limit_gib)
        from bench import harness

        harness.write_results(args.out, harness.jsonl(rows),
                              complete=True)
    plot(rows, plot_path)
    print(table(rows))


if __name__ == "__main__":
    main()
