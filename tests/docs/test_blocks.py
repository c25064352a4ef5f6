"""The docs harness's reading of Markdown: blocks, markers, transcripts, and the lines its
errors name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.blocks import DocsError, check_covered, parse, transcript

DOC = Path("docs/x.md")
REPO = Path(__file__).resolve().parents[2]


def test_blocks_carry_their_line_language_and_kind() -> None:
    text = "# T\n\n```python\nprint(1)\n```\n\n```text\n$ cronwheel cron next '* * * * *'\nx\n```\n"
    first, second = parse(DOC, text)
    assert (first.where, first.lang, first.kind, first.text) == (
        "docs/x.md:3",
        "python",
        "python",
        "print(1)\n",
    )
    assert (second.line, second.kind) == (7, "transcript")


def test_a_block_without_a_language_or_marker_is_unmarked() -> None:
    (block,) = parse(DOC, "```\nls\n```\n")
    assert block.kind == "unmarked"
    (block,) = parse(DOC, "```ini\n[Unit]\n```\n")
    assert block.kind == "unmarked"
    (block,) = parse(DOC, "```text\nsome output\n```\n")
    assert block.kind == "text"


def test_markers_skip_cover_and_set_up() -> None:
    text = (
        "<!-- docs-test: skip — runs forever -->\n```sh\ncronwheel worker\n```\n"
        "<!-- docs-test: covered by tests/e2e/test_dev.py::test_x -->\n```sh\nx\n```\n"
        "<!-- docs-test: setup\nimport os\n-->\n```python\nprint(os)\n```\n"
    )
    skip, covered, setup = parse(DOC, text)
    assert (skip.kind, skip.argument, skip.marker_line) == ("skip", "runs forever", 1)
    assert (covered.kind, covered.argument) == ("covered", "tests/e2e/test_dev.py::test_x")
    assert (setup.kind, setup.marker, setup.argument) == ("python", "setup", "import os\n")


def test_skip_and_covered_markers_may_wrap_and_explain() -> None:
    text = (
        "<!-- docs-test: skip — a long reason\n  that wraps -->\n```sh\nx\n```\n"
        "<!-- docs-test: covered by tests/a.py::test_b (with -duration 5) -->\n```sh\nx\n```\n"
    )
    skip, covered = parse(DOC, text)
    assert (skip.kind, skip.argument) == ("skip", "a long reason that wraps")
    assert (covered.kind, covered.argument) == ("covered", "tests/a.py::test_b")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- docs-test: skip — x -->\n\n```sh\nx\n```\n", "docs/x.md:1: a docs-test marker"),
        ("<!-- docs-test: skip -->\n```sh\nx\n```\n", "docs/x.md:1: a skip marker must say why"),
        ("<!-- docs-test: maybe -->\n```sh\nx\n```\n", "docs/x.md:1: unknown docs-test marker"),
        ("text\n\n```python\nprint(1)\n", "docs/x.md:3: this ``` fence is never closed"),
    ],
)
def test_mistakes_are_named_with_their_line(text: str, message: str) -> None:
    with pytest.raises(DocsError) as err:
        parse(DOC, text)
    assert str(err.value).startswith(message), err.value


def test_another_comment_before_a_fence_is_no_marker() -> None:
    text = (
        "<!-- docs-test: skip — x -->\n```sh\nx\n```\n"
        "text\n<!-- prettier-ignore -->\n```sh\ny\n```\n"
    )
    first, second = parse(DOC, text)
    assert (first.kind, second.kind, second.marker) == ("skip", "shell", None)


def test_a_marker_shown_inside_a_block_is_an_example() -> None:
    text = "````text\n<!-- docs-test: skip — x -->\n```sh\nx\n```\n````\n"
    (block,) = parse(DOC, text)
    assert block.kind == "text"


def test_a_block_in_a_list_item_loses_only_the_item_indent() -> None:
    (block,) = parse(DOC, "- item:\n\n  ```python\n  if x:\n      y()\n  ```\n")
    assert block.text == "if x:\n    y()\n"


def test_covered_by_must_name_a_test_that_exists() -> None:
    assert check_covered("tests/docs/test_blocks.py::test_covered_by_must_name", REPO)
    assert check_covered("tests/nowhere.py::test_x", REPO) == "tests/nowhere.py does not exist"
    assert check_covered("tests/docs/test_blocks.py", REPO)
    here = "tests/docs/test_blocks.py::test_covered_by_must_name_a_test_that_exists"
    assert check_covered(here, REPO) is None


def test_a_transcript_pairs_each_command_with_its_output() -> None:
    text = "$ echo a \\\n  b\na b   \n\n$ true\n"
    assert transcript(text) == [("echo a \\\n  b", "a b"), ("true", "")]


def test_a_class_named_by_the_docs_covers_the_tests_it_inherits() -> None:
    """tests/store runs the conformance suite's classes: a doc names their tests
    through the backend class that inherits them."""
    inherited = "tests/store/test_materialize.py::TestMaterialize::test_due_jobs_by_shard"
    assert check_covered(inherited, REPO) is None
    assert check_covered("tests/store/test_materialize.py::TestMaterialize::test_nothing", REPO)
    assert check_covered("tests/store/test_materialize.py::test_due_jobs_by_shard", REPO)
