"""``python -m cronwheel`` is the ``cronwheel`` command."""

from cronwheel.cli import main

main()
