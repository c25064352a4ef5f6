"""``--app module:attribute``: which modules it can name, and what it says when it cannot."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cronwheel.engine.runtime import load_handlers

APP = """\
from cronwheel import Worker

worker = Worker()


@worker.handler("greet")
def greet(ctx):
    return None
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder to run in, as the `cronwheel` script sees it: neither it nor "" (what
    `python -m` adds) on sys.path, and no module of it imported yet."""
    monkeypatch.chdir(tmp_path)
    kept = [p for p in sys.path if p not in ("", str(tmp_path))]
    monkeypatch.setattr(sys, "path", kept)
    for name in ("cw_quick_app", "cw_quick_pkg", "cw_quick_pkg.jobs"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def test_a_module_in_the_folder_the_command_runs_in_is_found(folder: Path) -> None:
    (folder / "cw_quick_app.py").write_text(APP)
    registry = load_handlers("cw_quick_app:worker")
    assert [h.name for h in registry.handlers()] == ["greet"]


def test_a_package_of_that_folder_is_found_too(folder: Path) -> None:
    (folder / "cw_quick_pkg").mkdir()
    (folder / "cw_quick_pkg" / "jobs.py").write_text(APP)  # a namespace package
    registry = load_handlers("cw_quick_pkg.jobs:worker")
    assert [h.name for h in registry.handlers()] == ["greet"]


def test_a_module_found_nowhere_is_named_in_the_error(folder: Path) -> None:
    with pytest.raises(ValueError, match="app: cannot import 'cw_quick_app'"):
        load_handlers("cw_quick_app:worker")
