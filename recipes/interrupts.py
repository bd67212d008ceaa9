"""The signals `keras-cosent` received, for the places that drop a KeyboardInterrupt.

`recipes.cli` turns SIGTERM and Ctrl-C into a KeyboardInterrupt raised wherever
the main thread is. Code that catches every exception drops it there: Keras'
`pythonify_logs` converts each logged value inside a bare `except:`, and on
JAX that conversion is where the training loop waits for its step, so most
signals landed in it and a terminated run trained on to its end (then exited
143). `recipes.training.interrupt_check` raises it again at the next batch or
epoch boundary of `fit`. This module imports nothing, as `recipes.cli` must not.
"""

# Appended by `recipes.cli`'s handler, cleared when a command starts and ends.
RECEIVED = []


def raise_if_received():
    """Raises KeyboardInterrupt again once a signal came (a no-op otherwise)."""
    if RECEIVED:
        raise KeyboardInterrupt
