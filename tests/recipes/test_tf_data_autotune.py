"""`recipes.tf_data_autotune`: no tf.data autotuning behind `PyDataset` input on TensorFlow."""

import doctest

import keras
import numpy as np
import pytest

import recipes.tf_data_autotune
from recipes.tf_data_autotune import disable_pydataset_autotune

ON_TF = keras.backend.backend() == "tensorflow"
tf_only = pytest.mark.skipif(not ON_TF, reason="Keras reads a PyDataset through tf.data on TensorFlow only")


class Shuffled(keras.utils.PyDataset):
    """Six batches of four rows, reshuffled at every epoch end from a seeded generator."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.x = rng.normal(size=(24, 3)).astype("float32")
        self.y = (self.x @ np.array([1.0, -2.0, 0.5], "float32"))[:, None]
        self.order = np.arange(24)
        self.rng = np.random.default_rng(1)
        self.epoch_ends = 0

    def __len__(self):
        return 6

    def __getitem__(self, i):
        rows = self.order[i * 4:(i + 1) * 4]
        return self.x[rows], self.y[rows]

    def on_epoch_end(self):
        self.epoch_ends += 1
        self.order = self.rng.permutation(24)


@pytest.fixture
def keras_get_tf_dataset():
    """Keras' own `PyDatasetAdapter.get_tf_dataset`, whether or not ours is installed."""
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    return recipes.tf_data_autotune._ORIGINAL_GET_TF_DATASET or PyDatasetAdapter.get_tf_dataset


def tf_dataset(get_tf_dataset):
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    return get_tf_dataset(PyDatasetAdapter(Shuffled(), shuffle=False))


@tf_only
def test_the_dataset_keras_builds_runs_without_autotuning(keras_get_tf_dataset):
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    # Keras' own: tf.data's default, autotuning on (the option is unset, which means on).
    assert tf_dataset(keras_get_tf_dataset).options().autotune.enabled in (None, True)
    assert disable_pydataset_autotune() is True
    assert tf_dataset(PyDatasetAdapter.get_tf_dataset).options().autotune.enabled is False


@tf_only
def test_the_batches_are_keras_own(keras_get_tf_dataset):
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    disable_pydataset_autotune()
    ours = [tuple(t.numpy() for t in b) for b in tf_dataset(PyDatasetAdapter.get_tf_dataset)]
    theirs = [tuple(t.numpy() for t in b) for b in tf_dataset(keras_get_tf_dataset)]
    assert len(ours) == len(theirs) == 6
    for (x, y), (x_ref, y_ref) in zip(ours, theirs):
        np.testing.assert_array_equal(x, x_ref)
        np.testing.assert_array_equal(y, y_ref)


@tf_only
def test_installing_twice_keeps_keras_method_underneath(keras_get_tf_dataset):
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    disable_pydataset_autotune()
    disable_pydataset_autotune()
    assert PyDatasetAdapter.get_tf_dataset is recipes.tf_data_autotune._get_tf_dataset
    assert recipes.tf_data_autotune._ORIGINAL_GET_TF_DATASET is keras_get_tf_dataset
    assert keras_get_tf_dataset is not recipes.tf_data_autotune._get_tf_dataset


def fit_three_epochs():
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    data = Shuffled()
    history = model.fit(data, epochs=3, verbose=0)
    return model.get_weights(), history.history["loss"], data.epoch_ends


@tf_only
def test_fit_trains_exactly_as_with_keras_own_input(keras_get_tf_dataset, monkeypatch):
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    disable_pydataset_autotune()
    weights, losses, epoch_ends = fit_three_epochs()
    monkeypatch.setattr(PyDatasetAdapter, "get_tf_dataset", keras_get_tf_dataset)
    ref_weights, ref_losses, ref_epoch_ends = fit_three_epochs()

    assert epoch_ends == ref_epoch_ends >= 2  # reshuffled between epochs in both
    np.testing.assert_array_equal(losses, ref_losses)
    for w, w_ref in zip(weights, ref_weights):
        np.testing.assert_array_equal(w, w_ref)
    assert losses[-1] < losses[0]


@pytest.mark.skipif(ON_TF, reason="checks the other backends")
def test_other_backends_are_left_alone():
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    before = PyDatasetAdapter.get_tf_dataset
    assert disable_pydataset_autotune() is False
    assert PyDatasetAdapter.get_tf_dataset is before
    assert recipes.tf_data_autotune._ORIGINAL_GET_TF_DATASET is None


def test_docstring_examples_run():
    failures, tried = doctest.testmod(recipes.tf_data_autotune, verbose=False)
    assert tried > 0 and failures == 0
