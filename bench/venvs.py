"""One virtualenv per peer under bench/.venvs/<peer>, created on first use with pinned
versions, so no peer's dependencies meet cronwheel's or each other's."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".venvs"

PINS: dict[str, list[str]] = {
    # The versions docs/architecture.md's performance goals name; arq at its latest release.
    "pgqueuer": ["pgqueuer==1.6.0", "asyncpg==0.32.0", "uvloop==0.23.0"],
    "procrastinate": ["procrastinate==3.10.0", "psycopg[binary,pool]==3.3.9"],
    "celery": ["celery[redis]==5.7.0"],
    "arq": ["arq==0.28.0"],
}


def python(peer: str) -> Path:
    """The peer's interpreter, its virtualenv created or refreshed if the pins changed."""
    venv = VENVS / peer
    py = venv / "bin" / "python"
    marker = venv / "cwbench-pins.txt"
    wanted = "\n".join(PINS[peer]) + "\n"
    if py.exists() and marker.exists() and marker.read_text() == wanted:
        return py
    base = shutil.which("python3") or sys.executable
    print(f"bench: creating {venv} ({', '.join(PINS[peer])})", file=sys.stderr)
    subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *PINS[peer]], check=True)
    marker.write_text(wanted)
    return py
