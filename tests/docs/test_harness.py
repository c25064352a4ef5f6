"""What the docs test says when a block fails: the file and line, what ran, and its
output, so a broken block is found and fixed without reading the harness."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.docs.blocks import parse
from tests.docs.test_code_blocks import DocsEnv, run_python, run_shell, run_transcript

DOC = Path("docs/x.md")


@pytest.fixture
def docs(tmp_path: Path) -> DocsEnv:
    return DocsEnv(tmp_path, dict(os.environ), "http://127.0.0.1:9")


def failure(check: object, text: str, docs: DocsEnv) -> str:
    (block,) = parse(DOC, text)
    with pytest.raises(pytest.fail.Exception) as failed:
        check(block, docs)  # type: ignore[operator]
    return str(failed.value)


def test_a_failing_python_block_is_named_with_its_error(docs: DocsEnv) -> None:
    message = failure(run_python, "intro\n\n```python\nprint(token)\n```\n", docs)
    assert message.startswith("docs/x.md:3: the ```python block failed (exit 1)")
    assert "print(token)" in message and "NameError: name 'token' is not defined" in message


def test_a_failing_shell_block_stops_at_the_first_error(docs: DocsEnv) -> None:
    message = failure(run_shell, "```sh\nfalse\necho after\n```\n", docs)
    assert message.startswith("docs/x.md:1: the ```sh block failed (exit 1)")
    assert "after" not in message.split("--- stdout ---")[1]


def test_a_sample_that_is_not_what_the_command_prints_shows_the_difference(
    docs: DocsEnv,
) -> None:
    message = failure(run_transcript, "```text\n$ echo actual\nsample\n```\n", docs)
    assert message.startswith("docs/x.md:1: `echo actual` (exit 0) printed something else")
    assert "-sample" in message and "+actual" in message


def test_a_sample_that_is_what_the_command_prints_passes(docs: DocsEnv) -> None:
    (block,) = parse(DOC, "```text\n$ printf 'a  \\n\\n'\na\n$ echo b >&2\nb\n```\n")
    run_transcript(block, docs)


def test_a_setup_runs_before_its_block(docs: DocsEnv) -> None:
    text = "<!-- docs-test: setup\nx = await_me = 41\n-->\n```python\nassert x + 1 == 42\n```\n"
    (block,) = parse(DOC, text)
    run_python(block, docs)


def test_a_block_may_await_at_the_top_level(docs: DocsEnv) -> None:
    (block,) = parse(DOC, "```python\nimport asyncio\nawait asyncio.sleep(0)\n```\n")
    run_python(block, docs)


def test_an_ellipsis_in_a_sample_stands_for_any_text_within_its_line(docs: DocsEnv) -> None:
    run_transcript(parse(DOC, "```console\n$ echo id: 0192-abc\nid: …\n```\n")[0], docs)
    message = failure(run_transcript, "```console\n$ printf 'a\\nb\\n'\na…\n```\n", docs)
    assert "printed something else than the sample" in message
    message = failure(run_transcript, "```console\n$ echo id: 1\nname: …\n```\n", docs)
    assert "printed something else than the sample" in message
