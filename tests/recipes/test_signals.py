"""The command group's SIGTERM and Ctrl-C handling, in-process."""

import gc
import os
import signal
import sys
import threading
import time
import weakref

import pytest

from recipes.cli import _terminate_as_interrupt


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_that_lands_in_a_garbage_collection_callback_still_interrupts(signum):
    # JAX registers a gc callback: a KeyboardInterrupt raised inside one is printed
    # and dropped by Python, and a terminated `train` ran on to its last epoch.
    fired = []

    def callback(phase, info):
        # In this thread: a collection that another thread starts would leave the
        # signal to land wherever this thread is.
        if (phase == "start" and not fired
                and threading.current_thread() is threading.main_thread()):
            fired.append(True)
            os.kill(os.getpid(), signum)
            for _ in range(10000):  # bytecodes for the handler to run in, here
                pass

    with _terminate_as_interrupt() as terminated:
        gc.callbacks.append(callback)
        try:
            with pytest.raises(KeyboardInterrupt):
                gc.collect()
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    time.sleep(0.01)
        finally:
            gc.callbacks.remove(callback)
    assert fired
    assert terminated == ([signal.SIGTERM] if signum == signal.SIGTERM else [])


def test_a_signal_that_lands_in_a_weakref_callback_still_interrupts():
    # Another place where Python drops exceptions: weakref callbacks (finalizers).
    class Thing:
        pass

    def callback(reference):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10000):
            pass

    with _terminate_as_interrupt() as terminated:
        thing = Thing()
        reference = weakref.ref(thing, callback)
        with pytest.raises(KeyboardInterrupt):
            del thing
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                time.sleep(0.01)
    assert reference() is None and terminated == [signal.SIGTERM]


def test_the_handlers_in_place_before_are_put_back():
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT),
              sys.unraisablehook)
    with _terminate_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) not in before
        assert sys.unraisablehook is not before[2]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT),
            sys.unraisablehook) == before


class _Exited(Exception):
    pass


@pytest.mark.parametrize("signum, code", [(None, 1), (signal.SIGINT, 1), (signal.SIGTERM, 143)])
def test_an_interrupted_process_exits_without_teardown(monkeypatch, tmp_path, capsys, signum,
                                                       code):
    # JAX, stopped while it waits for XLA to compile, leaves the compilation running
    # in XLA's threads, and Python's teardown then crashed the process (SIGSEGV, 139).
    from recipes import cli
    from recipes.commands import encode

    def interrupted_read(stream, name):
        if signum is None:
            raise KeyboardInterrupt  # as Ctrl-C raises it
        os.kill(os.getpid(), signum)
        for _ in range(10000):  # bytecodes for the handler to run in
            pass
        raise AssertionError("the signal did not interrupt")

    def exit_now(status):
        raise _Exited(status)

    monkeypatch.setattr(encode, "read_sentences", interrupted_read)
    monkeypatch.setattr(cli.os, "_exit", exit_now)
    output = tmp_path / "e.npy"
    monkeypatch.setattr(sys, "argv", ["keras-cosent", "encode", "all-MiniLM-L6-v2", "-", "-o",
                                      str(output)])
    with pytest.raises(_Exited) as exited:
        cli.main()  # a process entry: the arguments come from sys.argv
    assert exited.value.args == (code,)
    assert "Aborted!" in capsys.readouterr().err and not output.exists()
    # Called in-process with its arguments (click's CliRunner), it raises SystemExit.
    with pytest.raises(SystemExit) as stopped:
        cli.main(sys.argv[1:])
    assert stopped.value.code == code


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_fit_stops_at_the_next_batch_when_code_drops_the_interrupt(signum):
    # Keras converts each logged value inside a bare `except:` (`pythonify_logs`),
    # where JAX's training loop waits for its step: most signals landed there, and a
    # terminated `train` trained on to its last epoch (reproduced 5 of 6 on JAX).
    import keras
    import numpy as np

    from recipes.training import interrupt_check

    steps = []

    class DropsTheInterrupt(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            steps.append(batch)
            if len(steps) == 2:
                try:  # as pythonify_logs does
                    os.kill(os.getpid(), signum)
                    for _ in range(10000):  # bytecodes for the handler to run in
                        pass
                except:  # noqa: E722
                    pass

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.zeros((16, 3), "float32"), np.zeros((16, 1), "float32")
    with _terminate_as_interrupt() as terminated:
        # The check runs after the callback that dropped the interrupt, as it runs
        # after `pythonify_logs`.
        with pytest.raises(KeyboardInterrupt):
            model.fit(x, y, batch_size=2, epochs=3, verbose=0,
                      callbacks=[DropsTheInterrupt(), interrupt_check()])
    assert steps == [0, 1]  # not the 24 steps of 3 epochs
    assert terminated == ([signal.SIGTERM] if signum == signal.SIGTERM else [])
    # Cleared once the command ends: the next one in this process starts afresh.
    from recipes import interrupts

    assert interrupts.RECEIVED == []
