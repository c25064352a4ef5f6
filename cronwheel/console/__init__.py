"""The live view of ``cronwheel dev``: each event once, at its own time, read from the
store; history before this start marked as such; plain lines in a pipe or a file."""

from cronwheel.console.view import Output, watch_runs

__all__ = ["Output", "watch_runs"]
