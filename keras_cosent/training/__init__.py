"""Training set-up shared by the CLI, the benchmarks and users' scripts.

`build(encoder, dataset, objective, ...)` returns the compiled model, the batches
and the optimizer; `OBJECTIVES` is the one table of objective names, losses and
data layouts, extended with `register_objective`. `build_multi(encoder, tasks, ...)`
trains on several datasets in one run, each batch with its own dataset's objective.
"""

from keras_cosent.training.builder import TrainingSetup
from keras_cosent.training.builder import build
from keras_cosent.training.objectives import OBJECTIVES
from keras_cosent.training.objectives import Objective
from keras_cosent.training.objectives import get_objective
from keras_cosent.training.objectives import register_objective
from keras_cosent.training.multi_task import MultiTrainingSetup
from keras_cosent.training.multi_task import Task
from keras_cosent.training.multi_task import build_multi

__all__ = [
    "TrainingSetup",
    "build",
    "OBJECTIVES",
    "Objective",
    "get_objective",
    "register_objective",
    "MultiTrainingSetup",
    "Task",
    "build_multi",
]
