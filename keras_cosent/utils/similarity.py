"""Cosine similarity of the two sides of each pair, the quantity every loss ranks.

Losses and metrics accept `y_pred` either as one cosine per pair, shape
`(batch,)`, or as the two embeddings of each pair, shape `(batch, 2, dim)` (what
`keras_cosent.models.SiameseEncoder` outputs). `pair_cosine` maps both to
`(batch,)` float32 so that the maths downstream sees one form only.
`similarity_matrix` gives the in-batch losses their scores, every row against
every candidate, at float32 precision on every backend.
"""

import keras
import numpy as np
from keras import ops


def l2_normalize(x, axis=-1, epsilon=1e-12):
    """Scales `x` to unit L2 norm along `axis`, with finite float32 gradients everywhere.

    The norm is floored at `epsilon`, as `torch.nn.functional.normalize` (and
    so sentence-transformers' `Normalize`) floors it: `x / max(||x||, epsilon)`.
    `keras.ops.normalize` clips the inverse norm after taking it, so an all-zero
    vector yields `inf * 0`: NaN gradients on JAX and PyTorch. Here the squared
    norm is clipped at `epsilon ** 2` before `rsqrt`, which keeps value and
    gradient finite (a zero vector stays zero; its gradient is the incoming one
    times `1 / epsilon`, 1e12, which is inf once cast back to float16).
    Half-precision inputs are normalised in float32 (float16's squares overflow
    past a norm of 256, and its smallest value is far above `epsilon ** 2`) and
    returned in their dtype.

    Args:
        x: a float tensor (an integer one is normalised in float32).
        axis: int, the axis to normalise.
        epsilon: float, floor of the norm. Defaults to `1e-12`.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from keras_cosent.utils import l2_normalize
    >>> unit = keras.ops.convert_to_numpy(l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]])))
    >>> [[round(float(v), 2) for v in row] for row in unit]
    [[0.6, 0.8], [0.0, 0.0]]
    """
    x = ops.convert_to_tensor(x)
    dtype = keras.backend.standardize_dtype(x.dtype)
    wide = dtype if dtype in ("float32", "float64") else "float32"
    if wide != dtype:
        x = ops.cast(x, wide)
    squared = ops.sum(ops.square(x), axis=axis, keepdims=True)
    # epsilon ** 2, kept at or above float32's smallest normal number so that
    # the floor never rounds to 0 (rsqrt(0) is inf).
    floor = max(float(epsilon) ** 2, float(np.finfo(np.float32).tiny))
    unit = x * ops.rsqrt(ops.maximum(squared, ops.cast(floor, wide)))
    return unit if wide == dtype or "float" not in dtype else ops.cast(unit, dtype)


def pair_cosine(y_pred):
    """Returns the cosine of each pair as a float32 tensor of shape `(batch,)`.

    Args:
        y_pred: either cosines of shape `(batch,)` (or `(batch, 1)`), or pair
            embeddings of shape `(batch, 2, dim)`; embeddings need not be
            normalised. Any further columns (hard negatives) are ignored.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.utils import pair_cosine
    >>> emb = np.array([[[1.0, 0.0], [1.0, 1.0]]], dtype="float32")
    >>> round(float(pair_cosine(emb)[0]), 4)
    0.7071
    """
    y_pred = ops.cast(ops.convert_to_tensor(y_pred), "float32")
    rank = len(y_pred.shape)
    if rank == 1:
        return y_pred
    if rank == 2 and y_pred.shape[-1] == 1:
        return ops.squeeze(y_pred, axis=-1)
    if rank == 3:
        if y_pred.shape[1] is not None and y_pred.shape[1] < 2:
            raise ValueError(
                "Pair embeddings need at least 2 columns (anchor, other); "
                f"received `y_pred` of shape {tuple(y_pred.shape)}."
            )
        a = l2_normalize(y_pred[:, 0, :])
        b = l2_normalize(y_pred[:, 1, :])
        cosine = ops.sum(a * b, axis=-1)
        # Two equal embeddings (one sentence on both sides) score exactly 1: a.a
        # rounds to either side of 1, by backend, and the ranks of such pairs,
        # ties in truth, varied with it. (A zero embedding keeps its 0.)
        same = ops.logical_and(ops.all(ops.equal(a, b), axis=-1),
                               ops.any(ops.not_equal(a, 0.0), axis=-1))
        return ops.where(same, ops.ones_like(cosine), cosine)
    raise ValueError(
        "Expected `y_pred` of shape (batch,) with one cosine per pair, or "
        f"(batch, 2, dim) with the pair's embeddings. Received shape {tuple(y_pred.shape)}."
    )


def similarity_matrix(a, b):
    """`a @ b.T` computed at float32 precision on every backend and device.

    The in-batch losses (InfoNCE, NT-Xent, SupCon, batch-hard triplet) score
    every row of `a` against every row of `b` with this product. On NVIDIA GPUs
    from Ampere on, JAX multiplies float32 matrices in TensorFloat-32 unless
    told otherwise: 10 bits of mantissa, so a cosine is off by up to about 1e-3,
    which a temperature of 0.05 turns into logit errors of 0.02 (measured on an
    H200: InfoNCE, NT-Xent and SupCon values up to 4e-4 relative away from
    their float64 references, where PyTorch's matched). Here JAX is asked for
    `HIGHEST` precision for this product only (the backbone keeps the
    default); PyTorch multiplies float32 in float32 unless
    `torch.backends.cuda.matmul.allow_tf32` is set; TensorFlow has no
    per-product setting (`tf.config.experimental.enable_tensor_float_32_execution(False)`
    turns TensorFloat-32 off for the whole process).

    Args:
        a: `(n, dim)` tensor.
        b: `(m, dim)` tensor.

    Returns:
        `(n, m)` tensor of the dot products of each row of `a` with each row of `b`,
        float32 for float16 or bfloat16 inputs. float64 inputs stay float64 on
        TensorFlow only: Keras' matmul computes them in float32 on PyTorch, and
        JAX does without `jax_enable_x64`.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from keras_cosent.utils import similarity_matrix
    >>> a = np.array([[1.0, 0.0], [0.6, 0.8]], dtype="float32")
    >>> scores = keras.ops.convert_to_numpy(similarity_matrix(a, a))
    >>> [[round(float(v), 2) for v in row] for row in scores]
    [[1.0, 0.6], [0.6, 1.0]]
    """
    a, b = ops.convert_to_tensor(a), ops.convert_to_tensor(b)
    if len(a.shape) != 2 or len(b.shape) != 2 or (
        None not in (a.shape[1], b.shape[1]) and a.shape[1] != b.shape[1]
    ):
        raise ValueError(
            "`a` and `b` should be (n, dim) and (m, dim) with the same dim. Received shapes "
            f"{tuple(a.shape)} and {tuple(b.shape)}."
        )
    # Half-precision inputs (a mixed policy's embeddings) are multiplied in float32:
    # in their own dtype the products lose digits, and rows of norm above ~256 are inf.
    if keras.backend.standardize_dtype(a.dtype) in ("float16", "bfloat16"):
        a = ops.cast(a, "float32")
    if keras.backend.standardize_dtype(b.dtype) in ("float16", "bfloat16"):
        b = ops.cast(b, "float32")
    b_t = ops.transpose(b)
    if keras.backend.backend() == "jax":
        # Read when the product is traced, so it holds inside compiled steps and
        # for the products of the gradient too.
        import jax

        with jax.default_matmul_precision("highest"):
            return ops.matmul(a, b_t)
    return ops.matmul(a, b_t)
