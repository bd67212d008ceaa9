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
