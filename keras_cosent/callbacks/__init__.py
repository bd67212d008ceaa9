"""keras_cosent.callbacks."""
