"""One module per `keras-cosent` command; none imports keras at import time."""
