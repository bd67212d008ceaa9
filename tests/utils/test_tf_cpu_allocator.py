"""`import keras_cosent` gives TensorFlow its BFC CPU allocator unless the user chose otherwise.

Checked in fresh TensorFlow processes through TensorFlow's own view of its
allocator: after a matmul, `tf.config.experimental.get_memory_info("CPU:0")`
reports a non-zero peak only when the CPU allocator is a BFC pool. With the
default allocator it raises on some machines and reports a peak of 0 on others
(this project's 2-core machines have shown both), so both read as "default".
"""

import doctest
import os
import subprocess
import sys

import keras
import pytest

import keras_cosent.utils.tf_cpu_allocator
from keras_cosent.utils.tf_cpu_allocator import TF_CPU_ALLOCATOR_ENV

ON_TF = keras.backend.backend() == "tensorflow"

PROBE = """
import keras
import keras_cosent
import tensorflow as tf
tf.matmul(tf.ones([64, 64]), tf.ones([64, 64]))
try:
    peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
except ValueError:
    peak = 0
print("bfc" if peak > 0 else "default")
"""


def probe(env_value):
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.pop(TF_CPU_ALLOCATOR_ENV, None)
    if env_value is not None:
        env[TF_CPU_ALLOCATOR_ENV] = env_value
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not ON_TF, reason="starts TensorFlow processes; checked in the tensorflow run")
def test_import_turns_on_the_bfc_pool_after_keras_is_imported():
    assert probe(None) == "bfc"


@pytest.mark.skipif(not ON_TF, reason="starts TensorFlow processes; checked in the tensorflow run")
def test_the_users_choice_wins():
    assert probe("false") == "default"
    assert probe("true") == "bfc"


def test_sets_the_variable_only_when_unset(monkeypatch):
    monkeypatch.delenv(TF_CPU_ALLOCATOR_ENV, raising=False)
    assert keras_cosent.utils.tf_cpu_allocator.default_tf_cpu_allocator() == "true"
    monkeypatch.setenv(TF_CPU_ALLOCATOR_ENV, "false")
    assert keras_cosent.utils.tf_cpu_allocator.default_tf_cpu_allocator() == "false"
    assert os.environ[TF_CPU_ALLOCATOR_ENV] == "false"


def test_docstring_examples_run():
    failures, tried = doctest.testmod(keras_cosent.utils.tf_cpu_allocator, verbose=False)
    assert tried > 0 and failures == 0
