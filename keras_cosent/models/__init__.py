"""keras_cosent.models."""
