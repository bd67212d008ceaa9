"""The benchmark harness: runs a suite's stacks, each in its own child process,
interleaved round by round, and appends one JSON line per (round, stack) recording
the figures, toggles, config, machine, library versions and git commit.

Schema of a result line (every key present): `schema` (1), `run` (one id per
invocation: a file the page's commands append to can hold several runs, and the report
takes each apart instead of dividing one run's figures by another's), `suite`, `stack`, `round`,
`figures` (dict of numbers), `toggles`, `pieces` (runtime pieces in effect in the child),
`config`, `machine` {cpu, cores, memory_gib}, `versions` {python, keras, keras_hub,
tensorflow, jax, torch, sentence_transformers, keras_cosent}, `git` {commit, dirty},
`load_average_after`, `timestamp` (UTC, ISO 8601).
"""

import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import uuid

from bench.common import REPO_ROOT

SCHEMA = 1
KEYS = ("schema", "run", "suite", "stack", "round", "figures", "toggles", "pieces", "config",
        "machine", "versions", "git", "load_average_after", "timestamp")
SIZES = {
    # pairs trained, STS-B test pairs encoded (None: all 1,379, i.e. 2,758 sentences)
    "default": {"pairs": 512, "encode_pairs": None, "batch_size": 16, "max_length": 64,
                "encode_batch_size": 32, "seed": 0, "packing": True},
    "tiny": {"pairs": 8, "encode_pairs": 8, "batch_size": 4, "max_length": 16,
             "encode_batch_size": 8, "seed": 0, "packing": True},
}
SUITE_FIGURES = {
    "train-speed": ("train_pairs_per_s", "encode_sentences_per_s"),
    "encode-speed": ("encode_sentences_per_s",),
    "memory": ("peak_rss_mib",),
}
PACKAGES = {"keras": "keras", "keras_hub": "keras-hub", "tensorflow": "tensorflow",
            "jax": "jax", "torch": "torch", "sentence_transformers": "sentence-transformers",
            "keras_cosent": "keras-cosent"}


def machine():
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        memory = float("nan")
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(memory, 1)}


def versions():
    out = {"python": platform.python_version()}
    for key, dist in PACKAGES.items():
        try:
            out[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[key] = None
    return out


def git_state():
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True,
                              text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD") or None,
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def run(suite, stacks, rounds, size, toggles, out, log=print):
    """Runs `suite` for `rounds` rounds over `stacks` and appends lines to `out`;
    returns the lines."""
    config = dict(SIZES[size], size=size)
    common = {"schema": SCHEMA, "run": uuid.uuid4().hex[:12], "suite": suite, "toggles": toggles, "config": config,
              "machine": machine(), "versions": versions(), "git": git_state()}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    lines = []
    if os.path.dirname(os.path.abspath(out)):
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    for rnd in range(1, rounds + 1):
        for stack in stacks:
            cmd = [sys.executable, "-m", "bench.stacks", "--stack", stack,
                   "--config", json.dumps(config), "--toggles", json.dumps(toggles)]
            if suite == "encode-speed":
                cmd.append("--no-train")
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, env=env)
            got = [l for l in proc.stdout.splitlines() if l.startswith("{")]
            if proc.returncode != 0 or not got:
                sys.stderr.write(proc.stderr[-3000:])
                raise SystemExit(f"{suite} round {rnd}: stack {stack} failed "
                                 f"(exit {proc.returncode})")
            child = json.loads(got[-1])
            line = dict(common, stack=stack, round=rnd, figures=child["figures"],
                        pieces=child["pieces"],
                        load_average_after=[round(x, 2) for x in os.getloadavg()],
                        timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat())
            with open(out, "a") as f:
                f.write(json.dumps(line) + "\n")
            lines.append(line)
            log(f"round {rnd} {stack:<11}" + "  ".join(
                f"{k} {line['figures'][k]:.2f}" for k in SUITE_FIGURES[suite]))
    return lines


def write_results(path, text, complete):
    """Writes a tool's results `text` to `path` only once it is `complete`, through a
    temporary file renamed into place, so that a run that fails or is stopped leaves
    the file as it was; until then the text so far goes to `path` + ".partial", to
    follow a long run or keep what it measured."""
    partial = f"{path}.partial"
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    target = path if complete else partial
    temporary = f"{target}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, target)
    if complete and os.path.exists(partial):
        os.remove(partial)


def jsonl(rows):
    """`rows` as JSON lines, each ending in a newline."""
    return "".join(json.dumps(row) + "\n" for row in rows)


def earlier_results(path):
    """The lines the results file `path` holds (ending in a newline), or "" when
    there is none: a tool that adds lines to a file writes them after these."""
    if not path or not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text if not text or text.endswith("\n") else text + "\n"


def read_lines(path, suites=None):
    """The result lines of the JSON-lines file at `path`; with `suites`, every line
    must be a result of one of them (another benchmark's file is refused, naming it)."""
    try:
        with open(path, encoding="utf-8") as f:
            numbered = [(n, l) for n, l in enumerate(f, 1) if l.strip()]
    except OSError as error:
        raise SystemExit(f"{path}: {error.strerror}") from None
    lines = []
    for number, text in numbered:
        try:
            line = json.loads(text)
        except ValueError as error:
            raise SystemExit(f"{path}:{number}: not a JSON line ({error})") from None
        if suites is not None and (not isinstance(line, dict) or line.get("suite") not in suites):
            got = line.get("suite") if isinstance(line, dict) else None
            # The suites with their own table say where to read it.
            hint = (f"; read it with python -m bench {got} --summarize {path}"
                    if got in ("retrieval", "losses") else "")
            raise SystemExit(f"{path}:{number}: not a result of {', '.join(suites)} "
                             f"(its suite: {got!r}){hint}")
        lines.append(line)
    return lines


def run_key(line):
    """The invocation a line came from: its `run` id, or for lines written before
    runs had ids, the commit, toggles, config and suite they were measured under."""
    if line.get("run"):
        return line["run"]
    git = line.get("git") or {}
    return json.dumps([git.get("commit"), git.get("dirty"), line.get("toggles"),
                       line.get("config"), line["suite"]], sort_keys=True)


def runs(lines):
    """The lines grouped by invocation, in file order; a (stack, round) measured twice
    in one group is refused, naming it."""
    groups = {}
    for line in lines:
        groups.setdefault(run_key(line), []).append(line)
    for group in groups.values():
        seen = set()
        for line in group:
            key = (line["suite"], line["stack"], line["round"])
            if key in seen:
                raise SystemExit(
                    f"{line['suite']}: stack {line['stack']} round {line['round']} appears "
                    f"twice in one run (commit {(line.get('git') or {}).get('commit')}); "
                    "a run's lines must be written once each")
            seen.add(key)
    return list(groups.values())


def summarize(lines, base="peer"):
    """Per run, suite, stack and figure: median over rounds, and against `base` (the
    peer) the per-round ratios (each round's figure over the base's in the same round
    of the same run), their median and range. Returns a list of dicts."""
    rows = []
    for group in runs(lines):
        rows.extend(_summarize_run(group, base))
    return rows


def _summarize_run(lines, base):
    rows = []
    first = lines[0]
    run = {"run": run_key(first), "commit": (first.get("git") or {}).get("commit"),
           "toggles": first.get("toggles")}
    for suite in dict.fromkeys(l["suite"] for l in lines):
        sl = [l for l in lines if l["suite"] == suite]
        for stack in dict.fromkeys(l["stack"] for l in sl):
            for fig in SUITE_FIGURES.get(suite, ()):
                mine = {l["round"]: l["figures"][fig] for l in sl if l["stack"] == stack}
                ref = {l["round"]: l["figures"][fig] for l in sl if l["stack"] == base}
                ratios = [mine[r] / ref[r] for r in sorted(mine) if r in ref]
                rows.append(dict(
                    run, suite=suite, stack=stack, figure=fig, rounds=len(mine),
                    median=statistics.median(mine.values()),
                    ratios=ratios,
                    ratio_median=statistics.median(ratios) if ratios else None,
                    ratio_min=min(ratios) if ratios else None,
                    ratio_max=max(ratios) if ratios else None))
    return rows


def report(path, log=print, run=None):
    """Prints `summarize` of the file at `path` (of its run `run` alone when given),
    one table per run, and returns the rows."""
    lines = read_lines(path, suites=tuple(SUITE_FIGURES))
    if run is not None:
        lines = [l for l in lines if l.get("run") == run]
    rows = summarize(lines)
    shown = None
    for r in rows:
        if r["run"] != shown:
            shown = r["run"]
            commit = (r["commit"] or "unknown")[:7]
            toggles = ", ".join(f"{k}={v}" for k, v in (r["toggles"] or {}).items())
            log(f"run at commit {commit}" + (f", toggles {toggles}" if toggles else ""))
            log(f"{'suite':<13}{'stack':<12}{'figure':<30}{'rounds':>6}{'median':>10}"
                f"{'ratio (median round)':>22}{'range':>14}  per round")
        ratio = "" if r["ratio_median"] is None else f"{r['ratio_median']:.2f}"
        rng = "" if r["ratio_min"] is None else f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}"
        log(f"{r['suite']:<13}{r['stack']:<12}{r['figure']:<30}{r['rounds']:>6}"
            f"{r['median']:>10.2f}{ratio:>22}{rng:>14}  "
            + ", ".join(f"{x:.2f}" for x in r["ratios"]))
    return rows
