"""``python -m pal_opt``: the ``pal-opt`` command (:func:`pal_opt.cli.run`)."""

from .cli import run

if __name__ == "__main__":
    run()
