"""The installed cronwheel's version, for the API's document and webhooks' User-Agent."""

from __future__ import annotations

import functools


@functools.cache
def installed_version() -> str:
    """The version of the installed distribution; ``0.0.0`` when run from a bare tree.
    Read once, and importlib.metadata imported with the first read: a worker's start has
    no use for either (they cost it 5-10 ms), only its first webhook or notification."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cronwheel")
    except PackageNotFoundError:
        return "0.0.0"
