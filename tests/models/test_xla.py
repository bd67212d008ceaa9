"""XLA on TensorFlow by default, and off once the process runs out of memory maps.

TensorFlow never frees an XLA-compiled program (tensorflow/tensorflow#64170);
each maps memory, and once a process holds Linux's `vm.max_map_count` maps the
compiler fails and the process dies with SIGSEGV (reproduced by lowering the
limit: a loop of `keras-cosent train` calls in one process crashed after five
trainings at 6,000 maps). The guard is checked here with the count stood in for.
"""

import sys
import warnings

import keras
import pytest

from keras_cosent.models import xla
from tests.models.conftest import make_tiny_encoder

TENSORFLOW = keras.backend.backend() == "tensorflow"


def _dense():
    return keras.Sequential([keras.layers.Dense(2)])


@pytest.fixture
def maps(monkeypatch):
    """Sets what `memory_maps` reports; records whether it was asked."""
    state = {"value": None, "asked": 0}

    def fake():
        state["asked"] += 1
        return state["value"]

    monkeypatch.setattr(xla, "memory_maps", fake)
    monkeypatch.setattr(xla, "_warned", False)
    return state


def test_memory_maps_counts_this_process_against_the_linux_limit():
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
    except OSError:
        assert xla.memory_maps() is None
        return
    with open("/proc/self/maps") as f:
        before = len(f.read().splitlines())
    used, got_limit = xla.memory_maps()
    assert got_limit == limit
    assert abs(used - before) < 64  # the same count, give or take an allocation


def test_xla_stays_on_with_maps_to_spare(maps):
    maps["value"] = (50_000, 65_530)  # 23% left
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = xla.resolve_jit_compile(_dense())
    assert got == (True if TENSORFLOW else "auto")


def test_xla_turns_off_with_one_warning_when_maps_run_out(maps):
    maps["value"] = (59_000, 65_530)  # under 10% left
    if not TENSORFLOW:
        assert xla.resolve_jit_compile(_dense()) == "auto"
        assert maps["asked"] == 0  # only TensorFlow keeps its programs this way
        return
    with pytest.warns(UserWarning, match=r"59,000 of the 65,530 .*vm\.max_map_count"):
        assert xla.resolve_jit_compile(_dense()) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        encoder = make_tiny_encoder()
        assert encoder.jit_compile is False
        encoder.compile(loss="mse")
        assert encoder.jit_compile is False
    # What the caller asked for explicitly is passed through.
    assert xla.resolve_jit_compile(_dense(), jit_compile=True) is True


@pytest.mark.skipif(not TENSORFLOW, reason="the guard runs on TensorFlow only (checked above)")
@pytest.mark.parametrize("how", ["compile", "load_model"])
def test_the_warning_names_the_users_line(maps, tmp_path, how):
    # Reached through keras-cosent's compile, or through Keras' deserialisation
    # into the encoder's constructor: either way the user's call is named.
    encoder = make_tiny_encoder()
    path = str(tmp_path / "encoder.keras")
    if how == "load_model":
        encoder.save(path)
    maps["value"] = (59_000, 65_530)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if how == "compile":
            line = _line_after()
            encoder.compile(loss="mse")
        else:
            line = _line_after()
            keras.saving.load_model(path)
    found = [w for w in caught if "vm.max_map_count" in str(w.message)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert (found[0].filename, found[0].lineno) == (__file__, line)


def _line_after():
    """The line number after the caller's."""
    return sys._getframe(1).f_lineno + 1


def test_unreadable_maps_leave_xla_on(maps):
    maps["value"] = None
    assert xla.resolve_jit_compile(_dense()) == (True if TENSORFLOW else "auto")
