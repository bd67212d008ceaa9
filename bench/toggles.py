"""A/B toggles for the keras stacks: the pieces of `keras_cosent.runtime`, on or off.

`apply(toggles, backend)` runs in the child process before Keras is imported: it
starts the backend as `keras-cosent` does (`recipes.context.Environment`, which
enables every runtime piece that applies), then turns off the pieces toggled
off. Toggle names are
`keras_cosent.runtime.PIECES` (`tf_bfc_allocator`, `glibc_pool`,
`glibc_mmap_threshold`, `tf_threefry_dropout`, `tf_data_autotune_off`); value
True = on, as `keras-cosent` sets it.
"""

# The names of keras_cosent.runtime.PIECES, spelled here so that parsing the
# command line imports nothing (tests/bench checks they match).
NAMES = ("tf_bfc_allocator", "glibc_pool", "glibc_mmap_threshold", "tf_threefry_dropout",
         "tf_data_autotune_off")


def parse(items):
    """`["name=on", "other=off"]` -> `{"name": True, "other": False}`."""
    out = {}
    for item in items or ():
        name, _, value = item.partition("=")
        if name not in NAMES or value not in ("on", "off"):
            raise SystemExit(f"--toggle {item!r}: expected NAME=on|off with NAME in {NAMES}")
        out[name] = value == "on"
    return out


def apply(toggles, backend):
    """Starts `backend` as `keras-cosent` does, then applies `toggles`; returns
    `runtime.active()` (recorded in each result line)."""
    from recipes.context import Environment

    Environment(backend).activate_backend()
    from keras_cosent import runtime

    off = [name for name, on in toggles.items() if not on]
    if off:
        runtime.disable(off)
    return runtime.active()
