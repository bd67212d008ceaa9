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
