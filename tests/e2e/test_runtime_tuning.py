"""Service processes tune the garbage collector; a library user's process is left alone."""

from __future__ import annotations

import subprocess
import sys


def _probe(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_a_service_process_collects_young_objects_less_often_and_freezes_start_up() -> None:
    probe = (
        "import gc, sys; from cronwheel.engine import runtime; runtime.tune_process();"
        "print(gc.get_threshold()[0] == runtime.GC_GEN0_THRESHOLD, gc.get_freeze_count() > 0,"
        " sys.getswitchinterval() == runtime.SWITCH_INTERVAL)"
    )
    assert _probe(probe) == ["True", "True", "True"]


def test_importing_cronwheel_leaves_the_collector_alone() -> None:
    probe = (
        "import gc, sys; before = gc.get_threshold(), sys.getswitchinterval();"
        "import cronwheel.cli; print((gc.get_threshold(), sys.getswitchinterval()) == before)"
    )
    assert _probe(probe) == ["True"]
