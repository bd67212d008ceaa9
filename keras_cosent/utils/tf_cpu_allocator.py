"""TensorFlow's pooling (BFC) CPU allocator by default, set when keras_cosent is imported.

TensorFlow's default CPU allocator passes every allocation to the C library.
An XLA-compiled MiniLM training step (keras_cosent turns XLA on for TensorFlow,
see `keras_cosent.models.xla`) needs a few hundred MB of temporaries, and for
blocks that large the C library maps fresh memory and hands it back after the
step, so the kernel zero-fills every page again at every step. On 2 CPU cores,
8 epochs of 16 steps of 16 pairs (`bench/train_steps.py --stack tensorflow
--epochs 8` under `/usr/bin/time`, warm-up included): 10.7M page faults, 35 s of
system time, median 510 ms per step. With `TF_CPU_ALLOCATOR_USE_BFC=true`,
TensorFlow keeps freed memory in its best-fit-with-coalescing pool (the
allocator it uses on GPUs) and reuses it: 1.9M faults, 10 s, 460 ms per step;
the pool keeps its peak, so peak memory is 180-430 MB higher (BENCHMARKS.md,
"Speed").

TensorFlow reads the variable when it creates its CPU allocator, at its first
operation, not at import; so `import keras_cosent` sets it, after `import keras`
too, unless the user has set it (`TF_CPU_ALLOCATOR_USE_BFC=false` keeps
TensorFlow's default) or TensorFlow has already run an operation in the
process. JAX and PyTorch do not read it. Nothing here imports TensorFlow.
"""

import os

TF_CPU_ALLOCATOR_ENV = "TF_CPU_ALLOCATOR_USE_BFC"


def default_tf_cpu_allocator():
    """Ask TensorFlow for its BFC allocator on CPU unless the user chose one.

    Returns:
        The value `TF_CPU_ALLOCATOR_USE_BFC` now has.

    Example:

    >>> import os
    >>> from keras_cosent.utils.tf_cpu_allocator import default_tf_cpu_allocator
    >>> default_tf_cpu_allocator() == os.environ["TF_CPU_ALLOCATOR_USE_BFC"]
    True
    """
    return os.environ.setdefault(TF_CPU_ALLOCATOR_ENV, "true")
