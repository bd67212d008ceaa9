"""The `keras-cosent` command line: click recipes that train, evaluate, encode and export."""
