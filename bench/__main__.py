"""`python -m bench`: the benchmark harness.

    python -m bench train-speed  [--stacks peer,tensorflow,jax,torch] [--rounds N]
                                 [--toggle NAME=on|off ...] [--size tiny|default] --out FILE.jsonl
    python -m bench encode-speed ...     (same options; encoding only)
    python -m bench memory ...           (same options; peak RSS of a training run)
    python -m bench quality [bench/quality.py options]   (4-epoch STS runs; hours)
    python -m bench retrieval [bench/retrieval.py options] (the retrieval recipe vs
                                 sentence-transformers' MNRL on STS-B retrieval; JSON lines)
    python -m bench losses [bench/losses.py options] (triplet, InfoNCE, Matryoshka vs
                                 sentence-transformers' equivalents on STS-B; JSON lines)
    python -m bench report FILE.jsonl    (medians and per-round ratios to the peer, per run)
    python -m bench tool --help          (the tools, each with what it measures)
    python -m bench tool NAME [options]  (NAME: train-steps, profile-train,
                                          profile-encode-torch, machine-limit, peer-sts,
                                          gradcache, ranking-scaling,
                                          precision-speed, search-speed)
"""

import argparse
import runpy
import sys

TOOLS = {"train-steps": "bench.train_steps",
         "profile-train": "bench.profile_train",
         "profile-encode-torch": "bench.profile_encode_torch",
         "machine-limit": "bench.machine_limit",
         "peer-sts": "bench.peer_sts",
         "gradcache": "bench.gradcache",
         "ranking-scaling": "bench.ranking_scaling",
         "precision-speed": "bench.precision_speed",
         "search-speed": "bench.search_speed"}


def _tool_list():
    """`python -m bench tool NAME --help` for each, with the first line of its docstring."""
    import ast
    import importlib.util

    lines = ["python -m bench tool NAME [options]  (NAME --help: its options)", ""]
    for name, module in TOOLS.items():
        with open(importlib.util.find_spec(module).origin, encoding="utf-8") as f:
            doc = ast.get_docstring(ast.parse(f.read())) or ""
        lines.append(f"  {name:<22}{doc.splitlines()[0] if doc else ''}")
    return "\n".join(lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "report":
        from bench.harness import report

        p = argparse.ArgumentParser(prog="python -m bench report")
        p.add_argument("file")
        report(p.parse_args(rest).file)
        return 0
    if command in ("quality", "retrieval", "losses", "tool"):
        if command == "tool":
            if rest[:1] in (["-h"], ["--help"]):
                print(_tool_list())
                return 0
            if not rest:
                print(_tool_list(), file=sys.stderr)
                return 2
            if rest[0] not in TOOLS:
                raise SystemExit(f"tool: expected one of {sorted(TOOLS)}, got {rest[:1]}")
            module, rest = TOOLS[rest[0]], rest[1:]
        else:
            module = f"bench.{command}"
        sys.argv = [module, *rest]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    from bench import harness, toggles
    from bench.common import positive_int, repeated

    if command not in harness.SUITE_FIGURES:
        raise SystemExit(f"unknown suite {command!r}: expected one of "
                         f"{sorted(harness.SUITE_FIGURES)}, quality, retrieval, losses, report or tool")
    p = argparse.ArgumentParser(
        prog=f"python -m bench {command}",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description=f"{command}: {', '.join(harness.SUITE_FIGURES[command])} of each stack, "
                    "the stacks interleaved round by round; each result is appended to --out "
                    "as a JSON line, and the run's table printed (python -m bench report "
                    "FILE prints it again).")
    p.add_argument("--stacks", default="peer,tensorflow,jax,torch",
                   help="comma-separated, of peer (sentence-transformers), tensorflow, jax, torch")
    p.add_argument("--rounds", type=positive_int, default=2,
                   help="rounds; each runs every stack once, in turn")
    p.add_argument("--toggle", action="append", default=[], metavar="NAME=on|off",
                   help="a keras_cosent.runtime piece for the keras stacks (repeatable), of: "
                        + ", ".join(toggles.NAMES) + "; all are on by default, as in keras-cosent")
    p.add_argument("--size", choices=sorted(harness.SIZES), default="default",
                   help="tiny: a quick check of the harness; default: the measured size")
    p.add_argument("--out", required=True, help="JSON-lines file the results are appended to")
    args = p.parse_args(rest)
    if args.rounds < 1:
        p.error(f"--rounds should be at least 1. Received: {args.rounds}")
    stacks = args.stacks.split(",")
    bad = [s for s in stacks if s not in ("peer", "tensorflow", "jax", "torch")]
    if bad:
        raise SystemExit(f"--stacks: unknown {bad}; expected peer, tensorflow, jax, torch")
    if repeated(stacks):
        p.error(f"--stacks: {repeated(stacks)[0]} is given twice")
    lines = harness.run(command, stacks, args.rounds, args.size, toggles.parse(args.toggle),
                        args.out)
    harness.report(args.out, run=lines[0]["run"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
