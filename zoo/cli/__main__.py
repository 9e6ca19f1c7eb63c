"""``python -m zoo.cli``: the ``zoo`` command without the console script."""

from zoo.cli import main

main()
