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
from recipes.progress import end_open_line

BACKENDS = ("tensorflow", "jax", "torch")


class Environment:
    """State shared by the group and its commands (click's `examples/complex` pattern)."""

    def __init__(self, backend=None, tuning=True, verbose=False):
        self.backend = backend or os.environ.get("KERAS_BACKEND") or "tensorflow"
        self.tuning = tuning
        self.verbose = verbose
        self.group_args = []

    def activate_backend(self):
        """Selects `self.backend` for Keras, refusing if Keras already runs another one."""
        if self.backend not in BACKENDS:
            # Only KERAS_BACKEND can hold another name: the options are choices.
            raise CliError(
                f"KERAS_BACKEND is {self.backend!r}, a backend keras-cosent does not run on; "
                f"pass --backend ({', '.join(BACKENDS)}) or set KERAS_BACKEND to one of them."
            )
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
        if self.verbose or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
            _import_frameworks()
        else:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
            _import_quietly(_import_frameworks)
        if self.tuning:
            # Before the framework's first computation, so that the allocator
            # settings take effect (see keras_cosent.runtime).
            from keras_cosent import runtime

            runtime.enable(backend=self.backend)

    def log(self, message="", **kwargs):
        """Prints a progress or result line on stdout."""
        click.echo(message, **kwargs)

    def note(self, message):
        """Prints a side remark (what was reused, where files went) on stderr, on a
        line of its own (not after an open progress bar)."""
        end_open_line()
        click.echo(message, err=True)


pass_environment = click.make_pass_decorator(Environment, ensure=True)


def _import_frameworks():
    import keras  # noqa: F401
    import keras_hub  # noqa: F401
    import tensorflow as tf

    # TensorFlow looks for CUDA when it first lists its devices and logs the
    # failure on a machine without a GPU at ERROR level ("failed call to
    # cuInit"), which TF_CPP_MIN_LOG_LEVEL=2 lets through: look now, while
    # stderr is set aside, rather than at the first tokenisation.
    tf.config.list_physical_devices("GPU")


def _import_quietly(function):
    """Runs `function` with the process' stderr (file descriptor 2) set aside.

    TensorFlow's shared libraries log a few lines straight to file descriptor 2
    while they load ("All log messages before absl::InitializeLog()...",
    `cudart_stub`, `cpu_feature_guard`), before `TF_CPP_MIN_LOG_LEVEL` is read,
    under every backend (keras-hub's tokenizers load TensorFlow Text). They
    would turn a one-line `Error: ...` into five. What the imports print is kept
    and shown if they fail; `keras-cosent --verbose` does not set it aside.
    """
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            function()
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
