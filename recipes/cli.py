"""The `keras-cosent` command group: train, evaluate, encode, mine, export, export-st and
check-serving.

One click group holds the options every command shares (the Keras backend) in an
`Environment` passed down with `make_pass_decorator`; each command lives in its own
module under `recipes/commands/`. Nothing imported here imports keras, so that
`--backend` can still choose the backend.
"""

import contextlib
import os
import signal
import sys
import threading
import warnings

import click

from recipes import interrupts
from recipes.commands.check_serving import check_serving
from recipes.commands.encode import encode
from recipes.commands.evaluate import evaluate
from recipes.commands.export import export
from recipes.commands.export_st import export_st
from recipes.commands.mine import mine
from recipes.commands.train import train
from recipes.context import BACKENDS
from recipes.context import Environment
from recipes.errors import as_cli_error
from recipes.errors import one_line
from recipes.progress import end_open_line


def _warnings_shown_as_lines(show):
    """`warnings.showwarning` for a command: a `UserWarning` (what the library tells
    its user) as one `Warning:` line on stderr, without the file and source line
    of wherever it was raised; other categories (deprecations, NumPy's runtime
    warnings) as `show`, the function in place before, shows them."""

    def show_warning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, UserWarning):
            end_open_line()
            click.echo(f"Warning: {one_line(message)}", err=True)
        else:
            show(message, category, filename, lineno, file, line)

    return show_warning


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM (`timeout`, `docker stop`, a cancelled CI job) handled as Ctrl-C is:
    the command's clean-up runs (partial outputs removed, an export worker
    stopped), then the process exits with 143. Yields a list that holds the
    signal once one came.

    Either signal is handed again a moment later when its KeyboardInterrupt
    landed where Python drops exceptions (a garbage-collection callback, which
    JAX registers, a finalizer, a weakref callback: `sys.unraisablehook`):
    the run would otherwise have gone on to its end. Where code drops it
    itself (Keras' bare `except:`), `fit` raises it again at its next batch
    or epoch boundary (`recipes.interrupts`)."""
    terminated = []
    if threading.current_thread() is not threading.main_thread():
        yield terminated
        return
    received = interrupts.RECEIVED  # where fit looks for them (`recipes.interrupts`)
    received.clear()

    def interrupt(signum, frame):
        received.append(signum)
        if signum == signal.SIGTERM and not terminated:
            terminated.append(signum)
        raise KeyboardInterrupt

    previous_hook = sys.unraisablehook

    def hand_again(unraisable):
        if received and issubclass(unraisable.exc_type, KeyboardInterrupt):
            again = threading.Timer(0.05, os.kill, (os.getpid(), received[-1]))
            again.daemon = True
            again.start()
            return
        previous_hook(unraisable)

    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, interrupt)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        # Ctrl-C keeps Python's meaning (an ignored SIGINT stays ignored).
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, interrupt)
    sys.unraisablehook = hand_again
    try:
        yield terminated
    finally:
        sys.unraisablehook = previous_hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        received.clear()


def _exit_without_teardown(code):
    """Ends an interrupted process once its clean-up has run, without Python's teardown.

    Ctrl-C or SIGTERM can stop JAX while it waits for XLA to compile; the
    compilation goes on in XLA's threads, and the teardown that `sys.exit`
    starts frees what they use: the process crashed (SIGSEGV, exit status 139)
    after its clean-up and "Aborted!". Every file the command writes is closed
    by then (written whole or removed as it unwound), so only the standard
    streams are flushed. Only a process entry (`args` None) exits so: callers
    in-process (click's `CliRunner`) get `SystemExit` as usual.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else 1)


class KerasCosentGroup(click.Group):
    """A click group whose errors are one line and whose user errors exit with 2."""

    def invoke(self, ctx):
        with warnings.catch_warnings():  # restores showwarning when the command ends
            warnings.showwarning = _warnings_shown_as_lines(warnings.showwarning)
            try:
                return super().invoke(ctx)
            except Exception as error:
                cli_error = as_cli_error(error)
                if cli_error is None:
                    raise
                raise cli_error from error

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        interrupted = []
        with _terminate_as_interrupt() as terminated:
            try:
                return self._main(args, prog_name, complete_var, interrupted, **extra)
            except SystemExit as exiting:
                code = 128 + signal.SIGTERM if terminated else exiting.code
                if interrupted and args is None:
                    _exit_without_teardown(code)
                sys.exit(code)

    def _main(self, args, prog_name, complete_var, interrupted, **extra):
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as error:
            error.show()
            sys.exit(0)
        except click.ClickException as error:
            message = one_line(error.format_message())
            if isinstance(error, click.UsageError) and error.ctx is not None:
                message += f" (see '{error.ctx.command_path} --help')"
            click.echo(f"Error: {message}", err=True)
            sys.exit(error.exit_code)
        except click.Abort:
            interrupted.append(True)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        # Without standalone mode click returns the exit code of `ctx.exit` (e.g.
        # --help) or the command's return value (None for all of ours).
        sys.exit(result if isinstance(result, int) else 0)


@click.group(
    "keras-cosent",
    cls=KerasCosentGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default=None,
    # KERAS_BACKEND is read when the backend starts, not as this option's value:
    # one keras-cosent does not run on (numpy, openvino) is refused there, so that
    # --help and a command's own --backend still work.
    show_default="KERAS_BACKEND, else tensorflow",
    help="Keras backend to run on; chosen before Keras is imported.",
)
@click.option(
    "--tuning/--no-tuning",
    default=True,
    show_default=True,
    help="Apply keras_cosent.runtime's process-wide CPU tuning for the backend "
    "(allocators, dropout masks under XLA); recorded in a run's config.json.",
)
@click.option(
    "--verbose",
    is_flag=True,
    default=False,
    show_default=True,
    help="Show the frameworks' start-up log lines (TensorFlow, absl, CUDA probing), "
    "which are otherwise set aside unless TF_CPP_MIN_LOG_LEVEL is set.",
)
@click.version_option(package_name="keras-cosent", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx, backend, tuning, verbose):
    """Train, evaluate, encode with and export sentence encoders (Keras 3).

    \b
    keras-cosent train --output runs/demo          # CoSENT on the demo set
    keras-cosent evaluate runs/demo dev.csv --format sts-benchmark
    keras-cosent encode runs/demo sentences.txt -o embeddings.npy
    keras-cosent mine runs/demo --queries q.jsonl --corpus c.jsonl -o rows.jsonl
    keras-cosent export runs/demo runs/demo/export
    keras-cosent check-serving runs/demo/export/1
    keras-cosent export-st runs/demo runs/demo/sentence-transformers

    MODEL is a `train` output directory, a `.keras` file saved from a
    SentenceEncoder, a local Hugging Face or keras-hub checkpoint directory, a
    keras-hub preset name, or all-MiniLM-L6-v2 (the packaged checkpoint).
    """
    ctx.obj = Environment(backend, tuning=tuning, verbose=verbose)


for _command in (train, evaluate, encode, mine, export, export_st, check_serving):
    main.add_command(_command)
