"""cronwheel: a distributed job scheduler."""

from __future__ import annotations

__all__: list[str] = []
