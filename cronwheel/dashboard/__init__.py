"""The web dashboard at ``/ui``: server-rendered pages over the same store, services and
permissions as the API, with one small script of our own for live parts and actions
(decision 0023). :func:`install` adds it to an API app."""

from cronwheel.dashboard.app import install

__all__ = ["install"]
