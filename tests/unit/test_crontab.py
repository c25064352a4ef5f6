"""Reading a user's crontab as command jobs (issue 30 item 3, decision 0052): the
schedule, zone, environment, ``%`` and name of each entry, and every line that cannot be
imported named by its number. Data: tests/unit/data/crontab/README.md."""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from cronwheel.cli.remote.imports import COLUMNS
from cronwheel.cli.tables import rich_table
from cronwheel.core.crontab import (
    CrontabError,
    Entry,
    check_specs,
    parse_crontab,
    split_percent,
)
from cronwheel.schedule.api import next_times

DATA = Path(__file__).parent / "data" / "crontab"
MAN_PAGE = (DATA / "cronie-crontab.5.example").read_text()
CASES = [json.loads(line) for line in (DATA / "posix5_cases.jsonl").read_text().splitlines()]


def problems(text: str) -> list[tuple[int, str]]:
    with pytest.raises(CrontabError) as caught:
        parse_crontab(text)
    return [(p.line, p.message) for p in caught.value.problems]


def only(text: str, **options: Any) -> Entry:
    [entry] = parse_crontab(text, **options).entries
    return entry


def test_the_manual_pages_example_as_cron_reads_it() -> None:
    mail = 'mail -s "It\'s 10pm" joe'
    every_2h = "run 23 minutes after midn, 2am, 4am ..., everyday"
    crontab = parse_crontab(MAN_PAGE)
    got = [(e.line, e.cron, e.timezone, e.command, e.stdin) for e in crontab.entries]
    assert got == [
        (8, "5 0 * * *", "Japan", "$HOME/bin/daily.job >> $HOME/tmp/out 2>&1", None),
        (10, "15 14 1 * *", "Japan", "$HOME/bin/monthly", None),
        (12, "0 22 * * 1-5", "Japan", mail, "Joe,\n\nWhere are your kids?\n"),
        (13, "23 0-23/2 * * *", "Japan", f"echo {every_2h!r}".replace("'", '"'), None),
        (14, "5 4 * * sun", "Japan", 'echo "run at 5 after 4 every sunday"', None),
        (16, "0 4 8-14 * *", "Japan", 'test $(date +%u) -eq 6 && echo "2nd Saturday"', None),
    ]  # fmt: skip
    assert {e.shell for e in crontab.entries} == {"/bin/sh"}
    assert all(e.env == {} for e in crontab.entries)  # SHELL, MAILTO and CRON_TZ are cron's
    [warning] = crontab.warnings
    assert warning.line == 4 and warning.message.startswith("MAILTO is not imported")
    # every entry is a job the API would accept
    specs = [(e.line, e.spec(pool="default", timeout_seconds=3600)) for e in crontab.entries]
    assert check_specs(specs) == []
    assert len({spec["name"] for _, spec in specs}) == len(specs)


@pytest.mark.parametrize("case", [c for c in CASES if "expected" in c], ids=lambda c: c["id"])
def test_a_valid_expression_fires_as_its_case_says(case: dict[str, Any]) -> None:
    entry = only(f"CRON_TZ={case['tz']}\n{case['expr']}  /usr/bin/true\n")
    assert (entry.line, entry.cron, entry.timezone) == (2, case["expr"], case["tz"])
    start = datetime.fromisoformat(case["start"])
    expected = [datetime.fromisoformat(t).timestamp() for t in case["expected"]]
    found = next_times(entry.cron, entry.timezone, start, len(expected) or 1)
    # as instants: an aware time in a repeated hour equals none of another zone (PEP 495)
    assert [t.timestamp() for t in found] == expected


@pytest.mark.parametrize("case", [c for c in CASES if "valid" in c], ids=lambda c: c["id"])
def test_an_invalid_expression_is_refused_by_its_line(case: dict[str, Any]) -> None:
    if case["expr"].startswith("#"):  # in a crontab, a comment
        assert parse_crontab(f"{case['expr']} /usr/bin/true\n").entries == []
        return
    [(line, message)] = problems(f"# header\n{case['expr']} /usr/bin/true\n")
    assert line == 2 and message.startswith(repr(" ".join(case["expr"].split()))), message


def test_macros_become_cron_expressions() -> None:
    text = "\n".join(
        f"{m} /usr/bin/true {m}"
        for m in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
    )
    crons = [e.cron for e in parse_crontab(text).entries]
    assert crons == [
        "0 0 1 1 *", "0 0 1 1 *", "0 0 1 * *", "0 0 * * 0", "0 0 * * *", "0 0 * * *", "0 * * * *"
    ]  # fmt: skip


def test_reboot_and_every_bad_line_are_named_and_nothing_is_imported() -> None:
    text = "\n".join(
        [
            "0 * * * * /usr/bin/good",
            "@reboot /usr/bin/start-me",
            "@fortnightly /usr/bin/x",
            "61 * * * * /usr/bin/x",
            "0 * * * *",
            "just some words",
            "CRON_TZ=Mars/Olympus",
            "SHELL=bash",
            "0 * * * * %only stdin",
        ]
    )
    found = problems(text)
    assert [line for line, _ in found] == [2, 3, 4, 5, 6, 7, 8, 9]
    reasons = dict(found)
    assert "@reboot is not imported" in reasons[2] and "systemd" in reasons[2]
    assert "unknown macro '@fortnightly'" in reasons[3]
    assert reasons[4] == "'61 * * * *': minute: 61 is out of range 0-59"
    assert "has no command" in reasons[5]
    assert "five time fields" in reasons[6]
    assert reasons[7].startswith("CRON_TZ:") and "Mars/Olympus" in reasons[7]
    assert reasons[8].startswith("SHELL:") and "absolute path" in reasons[8]
    assert "command is empty" in reasons[9]


def test_settings_apply_to_the_entries_after_them() -> None:
    text = """
        FOO = "two words"
        0 1 * * * /usr/bin/a
        TZ=America/New_York
        BAR='x'
        SHELL=/bin/bash
        0 2 * * * /usr/bin/b
        CRON_TZ=Asia/Kolkata
        0 3 * * * /usr/bin/c
    """
    a, b, c = parse_crontab(text, timezone="Europe/Paris").entries
    assert (a.timezone, a.env, a.shell) == ("Europe/Paris", {"FOO": "two words"}, "/bin/sh")
    # TZ sets the zone and, as cron passes it, the command's TZ too; CRON_TZ only the zone
    assert (b.timezone, b.shell) == ("America/New_York", "/bin/bash")
    assert b.env == {"FOO": "two words", "TZ": "America/New_York", "BAR": "x"}
    assert (c.timezone, c.env) == ("Asia/Kolkata", b.env)
    assert b.argv() == ["/bin/bash", "-c", "/usr/bin/b"]


def test_variables_a_job_cannot_set_are_skipped_with_a_warning_naming_the_line() -> None:
    text = "PATH=/usr/local/bin:/usr/bin\nMAILTO=ops@example.com\nLD_PRELOAD=/x.so\n"
    crontab = parse_crontab(text + "HOME=/srv\n* * * * * /usr/bin/true\n")
    assert crontab.entries[0].env == {"HOME": "/srv"}
    got = [(w.line, w.message.split(" is not imported: ")[0]) for w in crontab.warnings]
    assert got == [(1, "PATH"), (2, "MAILTO"), (3, "LD_PRELOAD")]
    assert "operator sets PATH" in crontab.warnings[0].message


@pytest.mark.parametrize(
    ("text", "command", "stdin"),
    [
        ("echo hi", "echo hi", None),
        ("date +\\%Y-\\%m", "date +%Y-%m", None),
        ("mail -s hi root%Dear root,%%bye%", "mail -s hi root", "Dear root,\n\nbye\n"),
        ("cat%100\\% sure", "cat", "100% sure"),
        ("echo a\\b%c\\d", "echo a\\b", "c\\d"),  # other backslashes are kept
        ("cat%", "cat", ""),
    ],
)
def test_percent_as_cron_handles_it(text: str, command: str, stdin: str | None) -> None:
    assert split_percent(text) == (command, stdin)


def test_text_after_a_percent_reaches_the_command_on_stdin_through_its_own_shell() -> None:
    entry = only("* * * * * tr a-z A-Z%hello%world")
    # The text and the command are arguments, so neither is quoted into the other; the
    # inner shell gets no arguments, as cron's `sh -c COMMAND` does.
    assert entry.argv() == [
        "/bin/sh", "-c", 'printf %s "$1" | "$0" -c "$2"', "/bin/sh", "hello\nworld", "tr a-z A-Z"
    ]  # fmt: skip


def test_names_are_stable_per_command_and_tell_repeats_apart() -> None:
    first = parse_crontab("0 1 * * * /opt/jobs/backup.sh --full\n0 2 * * * /opt/jobs/backup.sh\n")
    again = parse_crontab(
        "FOO=1\n30 5 * * 1 /opt/jobs/backup.sh --full\n0 2 * * * /opt/jobs/backup.sh\n"
        "0 3 * * * /opt/jobs/backup.sh\n"
    )
    names = [e.name for e in first.entries]
    assert names[0].startswith("crontab-backup-sh-full-") and len(names[0]) == 31
    # the schedule and environment changed, the command did not: the same name
    assert [e.name for e in again.entries] == [*names, f"{names[1]}-2"]


def test_a_changed_schedule_changes_the_fingerprint_not_the_name() -> None:
    before = only("0 1 * * * /usr/bin/true").spec(pool="default", timeout_seconds=60)
    after = only("0 2 * * * /usr/bin/true").spec(pool="default", timeout_seconds=60)
    same = only("  0 1 * * *   /usr/bin/true  ").spec(pool="default", timeout_seconds=60)
    assert before["name"] == after["name"] == same["name"]
    assert before["payload"] != after["payload"] and before["payload"] == same["payload"]
    assert before["action"] == {
        "type": "command",
        "argv": ["/bin/sh", "-c", "/usr/bin/true"],
        "timeout_seconds": 60,
    }


def test_the_table_of_an_import_fits_80_columns() -> None:
    rows = [
        {"line": e.line, "result": "created", "name": e.name, "schedule": f"{e.cron} {e.timezone}"}
        for e in parse_crontab(MAN_PAGE).entries
    ]
    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    console.print(rich_table(rows, COLUMNS, 80), crop=False)
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert "line" in shown and shown.count("created") == len(rows)


# Debian's /etc/crontab, and a line of another user as /etc/cron.d files have them.
SYSTEM = """\
SHELL=/bin/sh
PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin

# m h dom mon dow user\tcommand
17 *\t* * *\troot\tcd / && run-parts --report /etc/cron.hourly
25 6\t* * *\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }
*/5 * * * * www-data [ -x /usr/bin/php ] && php /var/www/cron.php%quiet
@daily  root  /usr/local/bin/backup.sh
@daily  www-data  /usr/local/bin/backup.sh
"""


def test_a_system_crontab_reads_the_user_field_and_imports_one_users_lines() -> None:
    crontab = parse_crontab(SYSTEM, system_user="root")
    got = [(e.line, e.cron, e.user, e.command) for e in crontab.entries]
    assert got == [
        (5, "17 * * * *", "root", "cd / && run-parts --report /etc/cron.hourly"),
        (6, "25 6 * * *", "root",
         "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }"),
        (8, "0 0 * * *", "root", "/usr/local/bin/backup.sh"),
    ]  # fmt: skip
    assert crontab.other_users == {"www-data": [7, 9]}
    skipped = {w.line: w.message for w in crontab.warnings}
    assert skipped[2].startswith("PATH is not imported")
    assert "runs as 'www-data', not imported (--as-user root)" in skipped[7]
    assert "--as-user www-data" in skipped[9]
    www = parse_crontab(SYSTEM, system_user="www-data").entries
    assert [(e.line, e.user, e.command, e.stdin) for e in www] == [
        (7, "www-data", "[ -x /usr/bin/php ] && php /var/www/cron.php", "quiet"),
        (9, "www-data", "/usr/local/bin/backup.sh", None),
    ]
    specs = [(e.line, e.spec(pool="default", timeout_seconds=60)) for e in crontab.entries]
    assert check_specs(specs) == []
    assert specs[2][1]["payload"]["user"] == "root"


def test_a_system_entrys_name_starts_with_its_user_who_is_hashed_with_the_command() -> None:
    [root_backup] = [e for e in parse_crontab(SYSTEM, system_user="root").entries if e.line == 8]
    [www_backup] = [e for e in parse_crontab(SYSTEM, system_user="www-data").entries if e.line == 9]
    assert root_backup.name.startswith("crontab-root-backup-sh-")
    assert www_backup.name.startswith("crontab-www-data-backup-sh-")
    assert root_backup.name[-8:] != www_backup.name[-8:]
    # a user's crontab names a command as before the system format existed
    assert only("@daily /usr/local/bin/backup.sh").name.startswith("crontab-backup-sh-")
    user_spec = only("@daily /usr/local/bin/backup.sh").spec(pool="p", timeout_seconds=1)
    assert set(user_spec["payload"]) == {"imported_from", "fingerprint"}


def test_a_user_crontab_read_as_a_system_one_is_refused_naming_the_user_field() -> None:
    with pytest.raises(CrontabError) as caught:
        parse_crontab(
            "0 1 * * * $HOME/bin/daily.job\n@hourly root\n5 1 * * * root /bin/ok\n",
            system_user="root",
        )
    found = [(p.line, p.message) for p in caught.value.problems]
    assert [line for line, _ in found] == [1, 2]
    assert found[0][1].startswith("'$HOME/bin/daily.job' is not a user name")
    assert "leave out --system" in found[0][1]
    assert "no command after the user" in found[1][1]


@pytest.mark.parametrize("name", ["/etc/crontab", "/etc/cron.d/php"])
def test_a_file_of_etc_read_as_a_users_crontab_is_refused_saying_system(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from cronwheel.cli.remote.imports import _check_system

    file = io.StringIO("17 * * * * root run-parts /etc/cron.hourly\n")
    file.name = name
    with pytest.raises(SystemExit) as stopped:
        _check_system(file, system=False, as_user=None)
    assert stopped.value.code == 2
    assert f"{name} is a system crontab" in capsys.readouterr().err
    _check_system(file, system=True, as_user="root")  # said: read as one
