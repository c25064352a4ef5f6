"""The installed cronwheel's version, for the API's document and webhooks' User-Agent."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def installed_version() -> str:
    """The version of the installed distribution; ``0.0.0`` when run from a bare tree."""
    try:
        return version("cronwheel")
    except PackageNotFoundError:
        return "0.0.0"
