"""What `train` prints on stderr while Keras' progress bar holds a line open."""

import warnings

import keras

from recipes.cli import _warnings_shown_as_lines
from recipes.context import Environment
from recipes.progress import to_stderr


def test_notes_warnings_and_callback_prints_start_their_own_line_during_a_bar(capsys):
    # Keras' bar leaves its line open until its next update: a callback's print,
    # a note and a warning written meanwhile used to run on after the bar.
    with warnings.catch_warnings(), to_stderr():
        warnings.showwarning = _warnings_shown_as_lines(warnings.showwarning)
        bar = keras.utils.Progbar(3, interval=0)
        bar.update(1)
        print("Epoch 1: collapse guard fired")
        bar.update(2)
        warnings.warn("the data look odd", UserWarning)
        bar.update(3)  # finalized: the bar ends its line
        Environment().note("kept epoch 1")
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert "Epoch 1: collapse guard fired" in lines
    assert "Warning: the data look odd" in lines
    assert lines[-1] == "kept epoch 1"
    assert [line for line in lines if "1/3" in line or "2/3" in line or "3/3" in line]
    # No blank line where nothing needed ending.
    assert not captured.err.endswith("\n\n")


def test_nothing_is_added_where_no_bar_is_open(capsys):
    with to_stderr():
        print("a line")
        Environment().note("a note")
    assert capsys.readouterr().err == "a line\na note\n"


def test_a_note_after_an_interrupted_bar_starts_its_own_line(capsys):
    # train says "interrupted; ..." after leaving the context: it ran on after the
    # bar's "loss: 1.8981".
    try:
        with to_stderr():
            bar = keras.utils.Progbar(3, interval=0)
            bar.update(1, values=[("loss", 1.8981)])
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        Environment().note("interrupted; the last finished epoch is kept")
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "interrupted; the last finished epoch is kept"
    assert "loss: 1.8981" in lines[-2]
