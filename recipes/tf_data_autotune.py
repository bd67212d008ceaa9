"""No tf.data autotuning behind Keras' `PyDataset` input on TensorFlow.

On TensorFlow, Keras feeds a `keras.utils.PyDataset` (such as
`keras_cosent.data.PairBatches`) to `fit` as `tf.data.Dataset.from_generator(...)`
followed by `.prefetch(tf.data.AUTOTUNE)`, and makes a new iterator for every
epoch. With autotuning on (the tf.data default), each iterator runs an
optimisation thread that wakes after 10 ms, 20 ms, 40 ms and so on, doubling up
to 60 s. When the epoch ends, the old iterator's destructor
(`RootDataset::Iterator::~Iterator`) waits for that thread, and in our runs it
often waited for the whole sleep to run out: the epoch then ended at the next
wake-up, about 10.3 s or 20.6 s after it started (10.23 s and 20.47 s of
doubling sleeps; later wake-ups come up to 60 s apart), with the CPUs idle in
between.

On MiniLM training on 2 cores (16 steps of about 450 ms per epoch,
`bench/train_steps.py --stack tensorflow --epochs 12 --tf-data-autotune on`),
4 of 12 epochs ended 3.0-3.5 s after their last step, at 643 ms per step;
with autotuning off, none did (0.01-0.02 s). In an ad hoc probe, such epochs
had the CPUs 29-37% idle, and `py-spy dump --native` showed the main thread
in that destructor. The epochs of `bench/speed_worker.py` (32 steps) ended
at 20.6 s the same way.

Nothing here needs autotuning: the batches are built in Python, one at a time.
Keras already turns autotuning off when a `PyDataset` runs its own worker
threads (`workers > 1`); `disable_pydataset_autotune()` turns it off in the
one-worker case as well. The batches, their order and the `on_epoch_end` calls
are unchanged; in the runs above, epochs without the wait took 402-489 ms per
step with autotuning on and 382-453 with it off.

It lives with the recipes, not in `keras_cosent`, because it calls TensorFlow
(and replaces a Keras data-adapter method) where library code uses `keras.ops`
only. `keras-cosent train` calls it; library users on TensorFlow call it once
before their first `fit`. Imported lazily, after the Keras backend is chosen.
"""

import keras

_ORIGINAL_GET_TF_DATASET = None


def disable_pydataset_autotune():
    """Turn tf.data autotuning off for `PyDataset` input to `fit` on TensorFlow; idempotent.

    Returns:
        True if Keras' `PyDataset` input on TensorFlow now runs without
        autotuning, False where it does not apply (JAX and PyTorch backends,
        which do not read a `PyDataset` through tf.data).

    Example:

    >>> import keras
    >>> from recipes.tf_data_autotune import disable_pydataset_autotune
    >>> disable_pydataset_autotune() == (keras.backend.backend() == "tensorflow")
    True
    """
    global _ORIGINAL_GET_TF_DATASET
    if keras.backend.backend() != "tensorflow":
        return False
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    if _ORIGINAL_GET_TF_DATASET is None:
        _ORIGINAL_GET_TF_DATASET = PyDatasetAdapter.get_tf_dataset
        PyDatasetAdapter.get_tf_dataset = _get_tf_dataset
    return True


def _get_tf_dataset(adapter):
    """Keras' `PyDatasetAdapter.get_tf_dataset`, with `autotune.enabled = False`."""
    import tensorflow as tf

    dataset = _ORIGINAL_GET_TF_DATASET(adapter)
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
