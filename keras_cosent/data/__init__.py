"""keras_cosent.data."""
