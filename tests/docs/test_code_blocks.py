"""Every code block of README.md, CONTRIBUTING.md and docs/**/*.md runs as written.

``python`` blocks run as scripts (top-level ``await`` allowed), ``sh``/``bash`` blocks in
bash with ``set -euo pipefail``, ``$ command`` transcripts (``console``, or ``text`` whose
first line is a prompt) run each command and compare what it prints with the sample,
``json`` blocks must parse, ``sql`` blocks run on a freshly migrated PostgreSQL database.
They share one real ``cronwheel api`` process (a fresh SQLite store, a free port, no
worker: a webhook job to example.com is stored, never called), with ``CRONWHEEL_URL``,
``CRONWHEEL_TOKEN`` and ``CRONWHEEL_ADMIN_TOKEN`` exported, and HTTP proxies that send
anything but loopback nowhere; each document has its own working folder, and its blocks
run in document order. ``text`` blocks never run; any other block must carry a marker. The
conventions: CONTRIBUTING.md, "Docs that run".
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests import pg
from tests.docs.blocks import (
    Block,
    DocsError,
    check_covered,
    matches,
    normalise,
    parse,
    transcript,
)

REPO = Path(__file__).resolve().parents[2]
TOKEN = "docs-test-admin-token-0123456789"
CLOSED_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens there
TIMEOUT = 60  # seconds for one block; the whole module takes well under 90 s
_SAVE_AS = re.compile(r"^#\s*(?P<path>[\w./-]+\.py)\s*$")

RUNNER = """\
import ast, asyncio, sys, types
path = sys.argv[1]
code = compile(open(path).read(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
scope = {"__name__": "__main__", "__file__": path}
if code.co_flags & 0x80:  # CO_COROUTINE: the block awaits at the top level
    asyncio.run(types.FunctionType(code, scope)())
else:
    exec(code, scope)
"""


def documents() -> list[Path]:
    found = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [path for path in found if path.is_file()]


def collect() -> tuple[list[Block], list[str]]:
    blocks: list[Block] = []
    errors: list[str] = []
    for path in documents():
        try:
            blocks += parse(path.relative_to(REPO), path.read_text(encoding="utf-8"))
        except DocsError as exc:
            errors.append(str(exc))
    return blocks, errors


BLOCKS, PARSE_ERRORS = collect()


@dataclass(frozen=True)
class DocsEnv:
    """Where the blocks run: a working folder per document, and the environment of a
    user's shell (with the API's address and token)."""

    root: Path
    env: dict[str, str]
    url: str

    def folder(self, block: Block) -> Path:
        """The document's own folder: its blocks build on each other, not on another
        document's files (a ./cronwheel.db with a pending webhook run, say)."""
        folder = self.root / re.sub(r"[^\w.-]", "_", str(block.path))
        folder.mkdir(exist_ok=True)
        return folder

    def env_for(self, block: Block) -> dict[str, str]:
        return self.env | {"PYTHONPATH": str(self.folder(block))}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def docs_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocsEnv]:
    work = tmp_path_factory.mktemp("docs")
    url = f"http://127.0.0.1:{free_port()}"
    bin_dir = Path(sys.executable).parent
    # A user's shell: none of the test session's CRONWHEEL_* settings, no terminal width.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CRONWHEEL_") and k not in ("COLUMNS", "LINES")
    }
    env |= {
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "CRONWHEEL_URL": url,
        "CRONWHEEL_TOKEN": TOKEN,
        "CRONWHEEL_ADMIN_TOKEN": TOKEN,
    }
    # No block reaches the network: HTTP clients (httpx, curl) that honour the proxy
    # variables send anything but loopback to a closed port, and fail at once.
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        env[name] = env[name.upper()] = CLOSED_PROXY
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    log = work / "api.log"
    port = url.rsplit(":", 1)[1]
    command = [str(bin_dir / "cronwheel"), "api", "--db", f"sqlite:///{work / 'api.db'}"]
    with open(log, "wb") as out:
        api = subprocess.Popen(
            [*command, "--port", port], cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert api.poll() is None, f"cronwheel api exited: {log.read_text()}"
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"cronwheel api never answered: {log.read_text()}"
            time.sleep(0.05)
        yield DocsEnv(work, env, url)
    finally:
        api.send_signal(signal.SIGTERM)
        try:
            api.wait(timeout=20)
        except subprocess.TimeoutExpired:
            api.kill()
            api.wait(timeout=10)


def test_the_docs_parse() -> None:
    """Fences are closed and every marker sits just before a fence and can be read."""
    assert not PARSE_ERRORS, "\n".join(PARSE_ERRORS)


def test_there_are_blocks_to_run() -> None:
    kinds = {block.kind for block in BLOCKS}
    assert {"python", "shell", "transcript"} <= kinds, kinds


_TEST_REF = re.compile(r"tests/[a-z0-9_/]+\.py::(?:[A-Z]\w*::)?test_[a-z0-9_]+")


def test_the_tests_the_docs_name_exist() -> None:
    """A page that says "proved by tests/x.py::test_y" (docs/architecture.md) stays true."""
    missing = []
    for path in documents():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for ref in _TEST_REF.findall(line):
                why = check_covered(ref, REPO)
                if why:
                    missing.append(f"{path.relative_to(REPO)}:{number}: {ref}: {why}")
    assert not missing, "\n".join(missing)


def test_blocks_cannot_reach_the_network(docs_env: DocsEnv) -> None:
    """What a block sends beyond loopback fails at once, network or not; the API answers."""
    env = docs_env.env
    outside = subprocess.run(
        ["curl", "-sS", "https://example.com/hooks/report"], env=env, capture_output=True
    )
    assert outside.returncode != 0 and b"127.0.0.1" in outside.stderr, outside
    inside = subprocess.run(["curl", "-sSf", f"{docs_env.url}/healthz"], env=env, check=False)
    assert inside.returncode == 0


@pytest.mark.parametrize("block", BLOCKS, ids=[block.where for block in BLOCKS])
def test_block(block: Block, request: pytest.FixtureRequest) -> None:
    if block.marker == "setup" and block.kind not in ("python", "shell"):
        pytest.fail(f"{block.where}: a setup marker on a ```{block.lang} block", pytrace=False)
    kind = block.kind
    if kind == "unmarked":
        pytest.fail(
            f"{block.where}: a ```{block.lang or '(no language)'} block is neither runnable "
            "nor marked: make it ```text if it is a sample, or put "
            "'<!-- docs-test: skip — REASON -->' or "
            "'<!-- docs-test: covered by tests/PATH.py::TEST -->' on the line before the fence",
            pytrace=False,
        )
    elif kind == "covered":
        why = check_covered(block.argument, REPO)
        if why:
            pytest.fail(f"{block.where}: covered by {block.argument}: {why}", pytrace=False)
    elif kind == "json":
        check_json(block)
    elif kind == "python":
        run_python(block, request.getfixturevalue("docs_env"))
    elif kind == "shell":
        run_shell(block, request.getfixturevalue("docs_env"))
    elif kind == "transcript":
        run_transcript(block, request.getfixturevalue("docs_env"))
    elif kind == "sql":
        run_sql(block, request)
    # "skip" (its reason is required by the parser) and "text": nothing to run.


def report(block: Block, what: str, result: subprocess.CompletedProcess[str], code: str) -> str:
    return (
        f"{block.where}: the ```{block.lang} block {what} (exit {result.returncode})\n"
        f"--- what ran ---\n{code}"
        f"--- stdout ---\n{result.stdout[-4000:]}\n"
        f"--- stderr ---\n{result.stderr[-4000:]}"
    )


def run(
    args: list[str], docs: DocsEnv, block: Block, **kw: object
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            args,
            cwd=docs.folder(block),
            env=docs.env_for(block),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            **kw,  # type: ignore[arg-type]
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{block.where}: the ```{block.lang} block still ran after {TIMEOUT} s "
            f"(a server or a worker that never stops? bound it or mark it)\n"
            f"--- stdout ---\n{exc.stdout!r}\n--- stderr ---\n{exc.stderr!r}",
            pytrace=False,
        )


def script_name(block: Block, suffix: str) -> str:
    return re.sub(r"[^\w.-]", "_", block.where) + suffix


def run_python(block: Block, docs: DocsEnv) -> None:
    code = (block.argument if block.marker == "setup" else "") + block.text
    first = block.text.splitlines()[0] if block.text.strip() else ""
    save_as = _SAVE_AS.match(first)
    if save_as:  # "# myapp/jobs.py": a module later blocks import
        target = docs.folder(block) / save_as["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text)
    script = docs.folder(block) / script_name(block, ".py")
    script.write_text(code)
    runner = docs.root / "_run_block.py"
    runner.write_text(RUNNER)
    result = run([sys.executable, str(runner), str(script)], docs, block)
    if result.returncode != 0:
        pytest.fail(report(block, "failed", result, code), pytrace=False)


def run_shell(block: Block, docs: DocsEnv) -> None:
    code = "set -euo pipefail\n" + (block.argument if block.marker == "setup" else "")
    code += block.text
    script = docs.folder(block) / script_name(block, ".sh")
    script.write_text(code)
    result = run(["bash", str(script)], docs, block)
    if result.returncode != 0:
        pytest.fail(report(block, "failed", result, code), pytrace=False)


def run_transcript(block: Block, docs: DocsEnv) -> None:
    steps = transcript(block.text)
    assert steps, f"{block.where}: a transcript without a '$ ' command"
    for command, expected in steps:
        result = run(["bash", "-o", "pipefail", "-c", command], docs, block)
        printed = normalise(result.stdout + result.stderr)
        if not matches(expected, printed):
            diff = "\n".join(
                difflib.unified_diff(
                    expected.splitlines(), printed.splitlines(), "the docs", "printed", lineterm=""
                )
            )
            pytest.fail(
                f"{block.where}: `{command}` (exit {result.returncode}) printed something else "
                f"than the sample:\n{diff}",
                pytrace=False,
            )


def check_json(block: Block) -> None:
    """One JSON value, or several one after the other (a sample of several objects)."""
    decoder, text, at = json.JSONDecoder(), block.text, 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        try:
            _, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            line = block.line + exc.lineno
            pytest.fail(f"{block.path}:{line}: not JSON: {exc.msg}", pytrace=False)


def run_sql(block: Block, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("pg_dsn")  # skips (fails in CI) when PostgreSQL is down
    name, dsn = pg.create_database("cronwheel_docs")
    try:
        migrated = subprocess.run(
            [sys.executable, "-m", "cronwheel", "migrate", "--db", dsn],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            cwd=REPO,
        )
        assert migrated.returncode == 0, migrated.stderr

        async def execute() -> None:
            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute(block.text)
            finally:
                await conn.close()

        try:
            asyncio.run(execute())
        except asyncpg.PostgresError as exc:
            pytest.fail(f"{block.where}: the ```sql block failed: {exc}", pytrace=False)
    finally:
        pg.drop_database(name)
