"""Runs pytest once per Keras backend and prints one combined result line.

Keras picks its backend when it is first imported, so each backend needs its own
process. Usage: `python scripts/run_tests.py [--backends tensorflow,jax,torch] [pytest args]`.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

BACKENDS = ("tensorflow", "jax", "torch")


def _counts(junit_path):
    root = ET.parse(junit_path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        for key in total:
            total[key] += int(suite.get(key, 0))
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    args, pytest_args = parser.parse_known_args()
    backends = [b for b in args.backends.split(",") if b]
    passed = failed = skipped = 0
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            junit = os.path.join(tmp, f"{backend}.xml")
            env = dict(os.environ, KERAS_BACKEND=backend)
            cmd = [sys.executable, "-m", "pytest", "-q", f"--junitxml={junit}",
                   "-p", "no:cacheprovider", *pytest_args]
            print(f"\n=== KERAS_BACKEND={backend}: {' '.join(cmd[1:])}", flush=True)
            start = time.time()
            code = subprocess.call(cmd, env=env)
            if not os.path.exists(junit):
                print(f"pytest on {backend} produced no report (exit {code})")
                failed += 1
                lines.append(f"{backend}: pytest exited {code} with no report")
                continue
            c = _counts(junit)
            b_failed = c["failures"] + c["errors"]
            b_passed = c["tests"] - b_failed - c["skipped"]
            if code not in (0, 1, 5) and b_failed == 0:
                b_failed = 1  # pytest itself broke (usage or internal error)
            passed += b_passed
            failed += b_failed
            skipped += c["skipped"]
            lines.append(f"{backend}: {b_passed} passed, {b_failed} failed, "
                         f"{c['skipped']} skipped in {time.time() - start:.0f}s")
    print("\n" + "\n".join(lines))
    print(f"all backends: {passed} passed, {failed} failed, {skipped} skipped")
    if passed == 0:
        print("no test ran")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
