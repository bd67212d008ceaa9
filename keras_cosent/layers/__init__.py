"""keras_cosent.layers."""
