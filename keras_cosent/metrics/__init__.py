"""keras_cosent.metrics."""
