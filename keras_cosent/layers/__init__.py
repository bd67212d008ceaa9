"""keras_cosent.layers."""

from keras_cosent.layers.softmax_classifier_head import SoftmaxClassifierHead
