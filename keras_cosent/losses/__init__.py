"""keras_cosent.losses."""
