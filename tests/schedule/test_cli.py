"""``cronwheel cron next`` through click's CliRunner."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from click.testing import CliRunner

from cronwheel.cli import main

EXAMPLE = ["cron", "next", "0 30 2 * * ?", "--tz", "America/New_York"]
EXAMPLE += ["--from", "2027-03-13T00:00:00", "--count", "3"]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_issue_example_prints_dst_correct_instants() -> None:
    code, out, err = run(*EXAMPLE)
    assert code == 0, err
    lines = [line for line in out.splitlines() if "2027-03-1" in line]
    assert len(lines) == 3
    assert "2027-03-13T02:30:00-05:00" in lines[0] and "2027-03-13T07:30:00+00:00" in lines[0]
    assert "2027-03-14T03:00:00-04:00" in lines[1] and "2027-03-14T07:00:00+00:00" in lines[1]
    assert "moved" in lines[1] and "02:30" in lines[1]
    assert "2027-03-15T02:30:00-04:00" in lines[2] and "moved" not in lines[2]


def test_json_output() -> None:
    code, out, _ = run(*EXAMPLE, "--json")
    assert code == 0
    assert json.loads(out) == [
        {
            "at": "2027-03-13T02:30:00-05:00",
            "utc": "2027-03-13T07:30:00+00:00",
            "wall": "2027-03-13T02:30:00",
            "dst": None,
        },
        {
            "at": "2027-03-14T03:00:00-04:00",
            "utc": "2027-03-14T07:00:00+00:00",
            "wall": "2027-03-14T02:30:00",
            "dst": "moved",
        },
        {
            "at": "2027-03-15T02:30:00-04:00",
            "utc": "2027-03-15T06:30:00+00:00",
            "wall": "2027-03-15T02:30:00",
            "dst": None,
        },
    ]


def test_overlap_marks_and_policies() -> None:
    args = ["cron", "next", "30 1 * * *", "--tz", "America/New_York", "--json"]
    args += ["--from", "2024-11-03T00:00:00", "--count", "2"]
    code, out, _ = run(*args, "--dst-overlap", "both")
    assert code == 0
    assert [(o["at"], o["dst"]) for o in json.loads(out)] == [
        ("2024-11-03T01:30:00-04:00", "repeated"),
        ("2024-11-03T01:30:00-05:00", "repeated"),
    ]
    code, out, _ = run(*args)
    assert [(o["at"], o["dst"]) for o in json.loads(out)] == [
        ("2024-11-03T01:30:00-04:00", "merged"),
        ("2024-11-04T01:30:00-05:00", None),
    ]


def test_shift_and_quartz_options() -> None:
    code, out, _ = run(*EXAMPLE, "--json", "--dst-gap", "shift")
    assert code == 0
    assert json.loads(out)[1]["at"] == "2027-03-14T03:30:00-04:00"
    assert json.loads(out)[1]["dst"] == "shifted"
    args = ["cron", "next", "0 0 12 ? * 6L", "--dialect", "quartz", "--json"]
    code, out, _ = run(*args, "--from", "2024-01-01T00:00:00+00:00", "--count", "1")
    assert code == 0
    assert json.loads(out)[0]["at"] == "2024-01-26T12:00:00+00:00"


def test_from_with_an_offset_and_the_defaults() -> None:
    code, out, _ = run("cron", "next", "0 * * * *", "--from", "2024-01-01T00:30:00+01:00", "--json")
    assert code == 0
    found = json.loads(out)
    assert len(found) == 5  # default count
    assert found[0]["at"] == "2024-01-01T00:00:00+00:00"  # --tz defaults to UTC


def test_default_from_is_now() -> None:
    code, out, _ = run("cron", "next", "* * * * *", "--json", "--count", "1")
    assert code == 0
    first = datetime.fromisoformat(json.loads(out)[0]["utc"])
    assert 0 < (first - datetime.now(UTC)).total_seconds() <= 61


def test_never_firing_expression() -> None:
    code, out, _ = run("cron", "next", "0 0 30 2 *")
    assert code == 0
    assert "never fires" in out
    code, out, _ = run("cron", "next", "0 0 30 2 *", "--json")
    assert json.loads(out) == []


def test_bad_input_exits_2_with_the_field_on_stderr() -> None:
    cases = [
        (("cron", "next", "* * * * 8"), "day-of-week: 8 is out of range 0-7"),
        (("cron", "next", "* * * *"), "expression: expected 5, 6 or 7 fields"),
        (("cron", "next", "* * * * *", "--tz", "Mars/Olympus"), "timezone: unknown IANA zone"),
        (("cron", "next", "* * * * *", "--from", "soon"), "'soon' is not an ISO 8601 datetime"),
        (("cron", "next", "* * * * *", "--count", "0"), "--count"),
        (("cron", "next", "* * * * *", "--dst-gap", "never"), "--dst-gap"),
        (("cron", "next", "0 0 * * * *", "--dialect", "quartz"), "exactly one of them must be '?'"),
    ]
    for args, message in cases:
        code, out, err = run(*args)
        assert code == 2, args
        assert message in err, (args, err)
        assert "Traceback" not in err and out == ""
