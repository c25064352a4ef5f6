"""The cron corpus: one test per line, the total score, and where each line comes from.

The corpus is kept in the repository (``tests/schedule/corpus``, its origins and licences in
the README beside it), so a clone runs it with nothing beside it; if it is missing these
tests fail rather than skip.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cronwheel.schedule import next_times, validate_cron

CORPUS = Path(__file__).resolve().parent / "corpus"
CASES_FILE = CORPUS / "cases.jsonl"
NOTICE = CORPUS / "README.md"
DIALECTS = {
    "posix5": "standard",
    "seconds6": "standard",
    "seconds7": "standard",
    "quartz7": "quartz",
}
POLICIES = {"vixie": ("gap_end", "first"), "instant": ("skip", "both"), "shift": ("shift", "first")}


def load_cases() -> list[dict[str, Any]]:
    if not CASES_FILE.is_file():
        return []
    lines = CASES_FILE.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


CASES = load_cases()


def instants(values: list[datetime]) -> list[datetime]:
    # Compare instants: == between aware datetimes of different zones is False whenever
    # one of them is ambiguous (PEP 495), even for the same instant.
    return [v.astimezone(UTC) for v in values]


def run_case(case: dict[str, Any]) -> None:
    """Assert that the engine agrees with one corpus line."""
    dialect = DIALECTS[case["dialect"]]
    if "valid" in case:
        assert case["valid"] is False
        with pytest.raises(ValueError):
            validate_cron(case["expr"], dialect)
        return
    start = datetime.fromisoformat(case["start"])

    def fire(count: int, gap: str = "gap_end", overlap: str = "first") -> list[datetime]:
        found = next_times(
            case["expr"],
            case["tz"],
            start,
            count,
            dialect=dialect,
            dst_gap=gap,
            dst_overlap=overlap,
        )
        assert all(str(f.tzinfo) == case["tz"] for f in found)
        return instants(found)

    if "expected" in case:
        want = instants([datetime.fromisoformat(x) for x in case["expected"]])
        assert fire(len(want)) == want
    if "expected_not_first" in case:
        first = fire(1)
        assert first[:1] != instants([datetime.fromisoformat(case["expected_not_first"])])
    for policy, values in case.get("expected_by_policy", {}).items():
        want = instants([datetime.fromisoformat(x) for x in values])
        assert fire(len(want), *POLICIES[policy]) == want, policy


def test_corpus_is_present() -> None:
    assert CASES_FILE.is_file(), f"cron corpus missing: {CASES_FILE.resolve()}"
    assert len(CASES) > 0


def test_corpus_is_inside_the_repository() -> None:
    # A clone must be complete: nothing outside the repository may be read.
    repo = Path(__file__).resolve().parents[2]
    assert CASES_FILE.resolve().is_relative_to(repo)


def test_corpus_provenance() -> None:
    """Every line names its source, reference and licence, and the notice counts them."""
    for case in CASES:
        for key in ("id", "source", "source_ref", "license"):
            assert case.get(key), f"{case.get('id', '?')}: no {key}"
    counted = Counter((c["source"], c["license"]) for c in CASES)
    # The table of the notice: | `source` | lines | ... | licence |
    rows = re.findall(r"^\| `([^`]+)` \| (\d+) \|.*\| ([^|]+) \|$", NOTICE.read_text(), re.M)
    noted = {(src, lic.split()[0].strip("`:")): int(n) for src, n, lic in rows}
    assert noted == dict(counted), "tests/schedule/corpus/README.md: the table is out of date"


MISSING: list[Any] = [pytest.param(None, id="corpus-missing")]


@pytest.mark.parametrize(
    "case",
    CASES or MISSING,
    ids=[c["id"] for c in CASES] or None,
)
def test_corpus_case(case: dict[str, Any] | None) -> None:
    assert case is not None, f"cron corpus missing: {CASES_FILE.resolve()}"
    run_case(case)


def test_corpus_score(capsys: pytest.CaptureFixture[str]) -> None:
    """Every line must pass; the score is printed for the record (pytest -s shows it)."""
    assert CASES, f"cron corpus missing: {CASES_FILE.resolve()}"
    failed = []
    for case in CASES:
        try:
            run_case(case)
        except (AssertionError, ValueError, pytest.fail.Exception) as exc:
            failed.append(f"{case['id']}: {exc!r}"[:200])
    score = f"cron corpus score: {len(CASES) - len(failed)}/{len(CASES)}"
    with capsys.disabled():
        print(f"\n{score}")
    assert not failed, score + "\n" + "\n".join(failed)
