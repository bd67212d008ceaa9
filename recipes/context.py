"""The object every command receives: the chosen Keras backend and terminal output.

Keras reads `KERAS_BACKEND` once, when it is first imported, so the backend must be
set before anything imports `keras` or `keras_cosent`. That is why no module on the
import path of `recipes.cli` imports either: a command calls
`Environment.activate_backend()` first and imports the library inside its body.
"""

import os
import sys

import click

from recipes.errors import CliError
from recipes.host_memory import pool_freed_memory

BACKENDS = ("tensorflow", "jax", "torch")


class Environment:
    """State shared by the group and its commands (click's `examples/complex` pattern)."""

    def __init__(self, backend=None):
        self.backend = backend or os.environ.get("KERAS_BACKEND") or "tensorflow"
        self.group_args = []

    def activate_backend(self):
        """Selects `self.backend` for Keras, refusing if Keras already runs another one."""
        keras = sys.modules.get("keras")
        if keras is not None:
            current = keras.backend.backend()
            if current != self.backend:
                raise CliError(
                    f"Keras is already imported with the {current!r} backend in this "
                    f"process, so --backend {self.backend} cannot take effect; run "
                    f"keras-cosent in a new process or pass --backend {current}."
                )
        os.environ["KERAS_BACKEND"] = self.backend
        if self.backend == "jax" and keras is None:
            # Before JAX starts its threads: reuse each step's freed temporaries
            # (in a process that has already run Keras, its threads keep their arenas).
            pool_freed_memory()
        # TensorFlow's C++ start-up chatter buries the results table otherwise.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    def log(self, message="", **kwargs):
        """Prints a progress or result line on stdout."""
        click.echo(message, **kwargs)

    def note(self, message):
        """Prints a side remark (what was reused, where files went) on stderr."""
        click.echo(message, err=True)


pass_environment = click.make_pass_decorator(Environment, ensure=True)
