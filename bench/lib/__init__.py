"""Shared by bench/run.py and every adapter. Standard library only: the peer adapters
run in their own virtualenvs, where cronwheel and its dependencies are not installed."""
