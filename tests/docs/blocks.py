"""Fenced code blocks of the Markdown docs, with the ``docs-test`` markers that say how each
is checked (CONTRIBUTING.md, "Docs that run").

A marker is an HTML comment whose last line is the line just before the fence:

- ``<!-- docs-test: skip — REASON -->``: not run; the reason is required.
- ``<!-- docs-test: covered by tests/PATH.py::TEST -->``: another test runs it; that test
  must exist.
- ``<!-- docs-test: setup`` … ``-->``: the lines in between run first, in the same script
  (invisible on a rendered page: the imports or the client a fragment assumes).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

RUN_PYTHON = frozenset({"python", "py", "python3"})
RUN_SHELL = frozenset({"sh", "bash", "shell"})
RUN_SQL = frozenset({"sql"})
TRANSCRIPT = frozenset({"console"})
DATA_JSON = frozenset({"json"})
NEVER_RUN = frozenset({"text"})
PROMPT = "$ "

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_MARKER_START = re.compile(r"<!--\s*docs-test:\s*(?P<rest>.*)$")
_COVERED = re.compile(r"^covered by\s+(?P<ref>\S+)(?:\s.*)?$", re.DOTALL)
_SKIP = re.compile(r"^skip\s*(?:[\u2014\u2013-]+|:)?\s*(?P<reason>.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (1-based line of the opening fence), its language,
    its text, and the marker just before it, if any."""

    path: Path
    line: int
    lang: str
    text: str
    marker: str | None = None  # "skip", "covered", "setup"
    argument: str = ""  # the reason, the test reference, or the setup code
    marker_line: int = 0

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def kind(self) -> str:
        """How the block is checked: python, shell, sql, transcript, json, text, skip,
        covered or unmarked."""
        if self.marker in ("skip", "covered"):
            return self.marker
        if self.lang in RUN_PYTHON:
            return "python"
        if self.lang in RUN_SHELL:
            return "shell"
        if self.lang in RUN_SQL:
            return "sql"
        if self.lang in TRANSCRIPT or (self.lang in NEVER_RUN and is_transcript(self.text)):
            return "transcript"
        if self.lang in DATA_JSON:
            return "json"
        if self.lang in NEVER_RUN:
            return "text"
        return "unmarked"


class DocsError(Exception):
    """A mistake in a document's blocks or markers, with its file and line."""


def is_transcript(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and lines[0].startswith(PROMPT)


def parse(path: Path, text: str) -> list[Block]:
    """Every fenced block of a Markdown text, in order. Raises DocsError, naming the line,
    for a fence never closed, a marker not just before a fence, or a marker it cannot read."""
    lines = text.splitlines()
    blocks: list[Block] = []
    used_markers: set[int] = set()
    inside: set[int] = set()  # line numbers within blocks: a marker shown there is an example
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        fence, indent = opened["fence"], len(opened["indent"])
        lang = opened["info"].strip().split(" ")[0].lower() if opened["info"].strip() else ""
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            # A block in a list item is indented as a whole: drop that indent only.
            line = lines[i]
            cut = min(indent, len(line) - len(line.lstrip(" ")))
            body.append(line[cut:])
            i += 1
        else:
            raise DocsError(f"{path}:{start + 1}: this {fence} fence is never closed")
        inside.update(range(start + 1, i + 2))
        marker = _marker_before(path, lines, start)
        if marker is not None:
            used_markers.add(marker[2])
        blocks.append(
            Block(
                path=path,
                line=start + 1,
                lang=lang,
                text="\n".join(body) + "\n",
                marker=marker[0] if marker else None,
                argument=marker[1] if marker else "",
                marker_line=marker[2] if marker else 0,
            )
        )
        i += 1
    for number, line in enumerate(lines, 1):
        if _MARKER_START.search(line) and number not in used_markers | inside:
            raise DocsError(
                f"{path}:{number}: a docs-test marker must end on the line just before "
                "a code fence (no blank line between)"
            )
    return blocks


def _marker_before(path: Path, lines: list[str], fence: int) -> tuple[str, str, int] | None:
    """The marker whose comment ends on the line before ``fence``: (kind, argument, line)."""
    end = fence - 1
    if end < 0 or not lines[end].rstrip().endswith("-->"):
        return None
    first = end
    while first >= 0 and not _MARKER_START.search(lines[first]):
        if "<!--" in lines[first] or (first < end and "-->" in lines[first]):
            return None  # another comment: not ours
        first -= 1
    if first < 0:
        return None
    found = _MARKER_START.search(lines[first])
    assert found is not None
    head = found["rest"]
    if first == end:
        head = head.rstrip().removesuffix("-->").strip()
        rest: list[str] = []
    else:
        head = head.strip()
        rest = [*lines[first + 1 : end], lines[end].rstrip().removesuffix("-->")]
    where = f"{path}:{first + 1}"
    if head.startswith("setup"):
        code = "\n".join([head.removeprefix("setup").strip(), *rest]).strip("\n")
        if not code.strip():
            raise DocsError(f"{where}: a setup marker holds no code")
        return "setup", code + "\n", first + 1
    # A skip or covered-by marker may wrap its reason over several lines.
    head = " ".join([head, *(line.strip() for line in rest)]).strip()
    covered = _COVERED.match(head)
    if covered:
        return "covered", covered["ref"], first + 1
    skipped = _SKIP.match(head)
    if skipped and head.startswith("skip"):
        if not skipped["reason"].strip():
            raise DocsError(f"{where}: a skip marker must say why: skip — REASON")
        return "skip", skipped["reason"].strip(), first + 1
    raise DocsError(
        f"{where}: unknown docs-test marker {head!r}: use 'skip — REASON', "
        "'covered by tests/PATH.py::TEST' or 'setup' followed by code"
    )


def check_covered(ref: str, repo: Path) -> str | None:
    """Why ``tests/PATH.py::TEST`` (or ``::Class::test``) names no test; None if it does.

    A class's tests include those it inherits from a base imported by name, since the
    store tests are the conformance suite's classes run on each backend."""
    path, sep, name = ref.partition("::")
    if not sep or not name:
        return f"{ref!r} is not of the form tests/PATH.py::TEST"
    file = repo / path
    if not file.is_file():
        return f"{path} does not exist"
    tree = ast.parse(file.read_text(encoding="utf-8"))
    scopes: list[tuple[list[ast.stmt], ast.Module]] = [(tree.body, tree)]
    for part in name.split("::"):
        part = part.split("[")[0]  # a parametrized id names the same function
        found = _find(part, scopes, repo)
        if found is None:
            return f"{path} has no test {name!r}"
        scopes = found
    return None


def _find(
    name: str, scopes: list[tuple[list[ast.stmt], ast.Module]], repo: Path
) -> list[tuple[list[ast.stmt], ast.Module]] | None:
    """The scopes (a class and its bases) of the definition NAME in SCOPES, or None."""
    for body, module in scopes:
        for node in body:
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name == name
            ):
                return _class_scopes(node, module, repo) if isinstance(node, ast.ClassDef) else []
    return None


def _class_scopes(
    node: ast.ClassDef, module: ast.Module, repo: Path
) -> list[tuple[list[ast.stmt], ast.Module]]:
    """The bodies a lookup in class NODE searches: its own, then its bases' (by import)."""
    scopes = [(node.body, module)]
    for base in node.bases:
        if not isinstance(base, ast.Name):
            continue
        for stmt in module.body:
            if (
                isinstance(stmt, ast.ImportFrom)
                and stmt.module
                and stmt.level == 0
                and any((a.asname or a.name) == base.id for a in stmt.names)
            ):
                source = repo / (stmt.module.replace(".", "/") + ".py")
                if source.is_file():
                    other = ast.parse(source.read_text(encoding="utf-8"))
                    scopes.extend(_find(base.id, [(other.body, other)], repo) or [])
        found = _find(base.id, [(module.body, module)], repo)
        if found:
            scopes.extend(found)
    return scopes


def transcript(text: str) -> list[tuple[str, str]]:
    """A ``$ command`` transcript as (command, expected output) pairs. A command may go on
    over lines ending with a backslash."""
    steps: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(PROMPT):
            command = [line[len(PROMPT) :]]
            while command[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                command.append(lines[i])
            steps.append(("\n".join(command), []))
        elif steps:
            steps[-1][1].append(line)
        i += 1
    return [(command, normalise("\n".join(output))) for command, output in steps]


def normalise(output: str) -> str:
    """Output as compared: trailing spaces of each line and trailing blank lines dropped."""
    return "\n".join(line.rstrip() for line in output.splitlines()).strip("\n")


ELLIPSIS = "…"


def matches(expected: str, printed: str) -> bool:
    """Whether ``printed`` is the sample: line for line, where ``…`` in a sample's line
    stands for any text within that line (an id, a time: what differs on every run)."""
    want, got = expected.splitlines(), printed.splitlines()
    if len(want) != len(got):
        return False
    for sample, line in zip(want, got, strict=True):
        if ELLIPSIS not in sample:
            if sample != line:
                return False
            continue
        pattern = ".*".join(re.escape(part) for part in sample.split(ELLIPSIS))
        if re.fullmatch(pattern, line) is None:
            return False
    return True
