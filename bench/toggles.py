"""A/B runtime toggles for the keras stacks: one function turns each piece on or off.

`apply(toggles, backend)` runs in the child process before Keras is imported. With
`keras_cosent.runtime` importable it goes through `runtime.enable` / `runtime.disable`;
otherwise (FALLBACK, delete after merging the runtime module) it reaches today's
`recipes.*` modules. Toggle names: `glibc_pooling`, `threefry_dropout`,
`tf_data_autotune_off`, `bfc_allocator` (value True = the piece on, as `keras-cosent` sets it).
"""

import os

NAMES = ("glibc_pooling", "threefry_dropout", "tf_data_autotune_off", "bfc_allocator")


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
    """Activates `backend` as `keras-cosent` does, then applies `toggles`; returns the
    dict of pieces in effect (recorded in each result line)."""
    from bench.common import library_module

    runtime = library_module("runtime")
    if runtime is not None:
        os.environ["KERAS_BACKEND"] = backend
        off = [k for k, v in toggles.items() if not v]
        runtime.enable(backend=backend)
        if off:
            runtime.disable(off)
        return dict(runtime.active())
    # --- FALLBACK: today's recipes modules (delete once keras_cosent.runtime is merged) ---
    if toggles.get("glibc_pooling", True):
        from recipes.context import Environment

        Environment(backend).activate_backend()
    else:
        os.environ["KERAS_BACKEND"] = backend
    return {"glibc_pooling": toggles.get("glibc_pooling", True),
            "threefry_dropout": toggles.get("threefry_dropout", True),
            "tf_data_autotune_off": toggles.get("tf_data_autotune_off", True),
            "bfc_allocator": toggles.get("bfc_allocator", True)}


def model_pieces(toggles):
    """FALLBACK half of `apply` run after Keras is imported (today's `bench.common.keras_siamese`
    applies ThreeFry and the autotune switch itself); a no-op with `keras_cosent.runtime`."""
    from bench.common import library_module

    if library_module("runtime") is not None:
        return
    if toggles.get("threefry_dropout", True):
        from recipes.xla_dropout import use_threefry_dropout

        use_threefry_dropout()
    if toggles.get("tf_data_autotune_off", True):
        from recipes.tf_data_autotune import disable_pydataset_autotune

        disable_pydataset_autotune()
