"""Fixtures shared by the metric tests: the STS-B dev gold scores."""

import numpy as np
import pytest


@pytest.fixture(scope="session")
def stsb_dev_scores(shared_data):
    """Gold scores of STS-B dev, read minimally: TAB separated, no quoting, column 5."""
    path = shared_data / "stsbenchmark" / "sts-dev.csv"
    with open(path, encoding="utf-8") as f:
        scores = [float(line.split("\t")[4]) for line in f if line.strip()]
    return np.asarray(scores, dtype="float64")
