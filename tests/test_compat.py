"""The private names in `keras_cosent.compat` exist in the installed Keras, keras-hub, TensorFlow."""

import keras
import pytest

from keras_cosent import compat


def test_every_private_name_is_there():
    errors = compat.check_private_api()
    assert not errors, "\n".join(str(e) for e in errors)


def test_a_missing_name_is_reported_with_symbol_and_versions():
    class Bare:
        pass

    with pytest.raises(compat.PrivateAPIError) as info:
        compat.attention_dropout(Bare())
    message = str(info.value)
    assert "keras.layers.MultiHeadAttention._dropout" in message
    assert keras.__version__ in message and compat.WRITTEN_AGAINST["keras"] in message


def test_a_missing_module_is_reported_by_name(monkeypatch):
    monkeypatch.setattr(compat.importlib, "import_module", _raise_import_error)
    with pytest.raises(compat.PrivateAPIError, match="keras.src.trainers.data_adapters"):
        compat.py_dataset_adapter()


def _raise_import_error(name):
    if name in ("keras", "keras_hub", "tensorflow"):
        return __import__(name)
    raise ImportError(f"No module named {name!r}")
