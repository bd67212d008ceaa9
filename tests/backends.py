"""Which test process runs a check whose result does not depend on the process's backend.

`scripts/run_tests.py` runs the suite once per Keras backend. A check that runs
in a child process naming its own backend, or that reads files and settings the
same way on every backend, gives the same result in all three processes, so it
runs in one of them (skipped, with the reason, in the other two).
"""

import keras
import pytest


def once_in(backend, what="a check independent of this process's backend"):
    """Mark a test to run only in the `backend` test process."""
    return pytest.mark.skipif(
        keras.backend.backend() != backend,
        reason=f"{what}: runs once per suite run, in the {backend} test process")
