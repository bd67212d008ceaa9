"""`python -m recipes` runs the `keras-cosent` command line."""

from recipes.cli import main

if __name__ == "__main__":
    main(prog_name="keras-cosent")
