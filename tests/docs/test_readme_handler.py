"""The README's "Your first handler", run as a user runs it: the example file is the block
the README shows, and the section's two shell blocks, taken from README.md (so that the
test breaks when the README drifts), start the `cronwheel` script from a folder holding
the example, without PYTHONPATH, give it a job, and the handler greets."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.docs.blocks import Block, parse
from tests.e2e.procs import free_port, wait_until

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "examples/quickstart/app.py"
TEST = "tests/docs/test_readme_handler.py::test_the_readme_handler_runs_in_cronwheel_dev"
# What a user has done already and this test's environment has too: the virtualenv.
SETUP = ". .venv/bin/activate"


def section_blocks() -> list[Block]:
    """The blocks of README.md's "Your first handler" section."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Your first handler\n", 1)[1].split("\n## ", 1)[0]
    return parse(Path("README.md"), section)


def without_setup(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if line.strip() != SETUP)


def test_the_example_file_is_the_block_the_readme_shows() -> None:
    [shown] = [b for b in section_blocks() if b.lang == "python"]
    assert shown.text.splitlines()[0] == f"# {EXAMPLE}"
    assert shown.text == (REPO / EXAMPLE).read_text(encoding="utf-8")
    # "A ten-line handler": the README promises a short one.
    assert len(shown.text.splitlines()) <= 10


def test_the_readme_handler_runs_in_cronwheel_dev(tmp_path: Path) -> None:
    blocks = [b.text for b in section_blocks() if b.marker == "covered" and b.argument == TEST]
    assert len(blocks) == 2, "the README's handler section lost a block marked for this test"
    dev_block, job_block = (without_setup(b) for b in blocks)
    assert dev_block.count("cronwheel dev ") == 1, dev_block
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The only change: a free port instead of 8080, for dev and (by CRONWHEEL_URL) the CLI.
    dev_block = dev_block.replace("cronwheel dev ", f"cronwheel dev --port {port} ")
    (tmp_path / EXAMPLE).parent.mkdir(parents=True)
    shutil.copy(REPO / EXAMPLE, tmp_path / EXAMPLE)
    # A user's shell: the virtualenv's `cronwheel` script first, none of the test session's
    # settings, and no PYTHONPATH: `--app` must find the module from the current folder.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CRONWHEEL_") and k not in ("PYTHONPATH", "COLUMNS", "LINES")
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CRONWHEEL_URL"] = url
    log = tmp_path / "dev.log"
    with open(log, "wb") as out:
        dev = subprocess.Popen(
            ["bash", "-e", "-c", dev_block],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal would give it
        )

    def answering() -> bool:
        if dev.poll() is not None:
            raise AssertionError(f"cronwheel dev exited ({dev.returncode}):\n{log.read_text()}")
        return httpx.get(f"{url}/readyz", timeout=2).is_success

    try:
        wait_until("cronwheel dev answers", answering, 60, [log])
        created = subprocess.run(
            ["bash", "-e", "-c", job_block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert created.returncode == 0, created.stdout + created.stderr

        def greeted_twice() -> bool:
            text = log.read_text()
            return text.count("hello, world: run ") >= 2 and "greet attempt 1/3 succeeded" in text

        # An occurrence every 5 s: the second within 10 s of the job, with room to spare.
        wait_until("the handler greets twice", greeted_twice, 40, [log])
        [job] = httpx.get(f"{url}/v1/jobs", timeout=5).json()["items"]
        runs = httpx.get(f"{url}/v1/jobs/{job['id']}/runs", timeout=5).json()["items"]
        assert sum(r["state"] == "succeeded" for r in runs) >= 2, runs
    finally:
        # Ctrl-C in the terminal: SIGINT to the whole process group.
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGINT)
        try:
            dev.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(timeout=10)
