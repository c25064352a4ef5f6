"""``cronwheel import crontab`` against a real ``cronwheel api`` (issue 30 item 3,
decision 0052): a crontab's entries become command jobs once; importing it again
creates nothing; a changed entry updates its job; --dry-run writes nothing; @reboot or
any invalid line imports nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py).
from tests.e2e.apiserver import api_store, api_url_per_module, shared_api  # noqa: F401
from tests.e2e.test_cli import cli, cli_process

CRONTAB = """\
# m h dom mon dow command
MAILTO=ops@example.com
CRON_TZ=Europe/Paris
BACKUP_DIR=/var/backups
30 2 * * * /usr/local/bin/backup.sh "$BACKUP_DIR" >/dev/null 2>&1
@hourly mail -s "hourly" root%it is%another hour
"""


def _jobs(url: str) -> list[dict[str, Any]]:
    listed = cli(url, "jobs", "list", "--name-prefix", "crontab-", "--json")
    assert listed.returncode == 0, listed.stderr
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return items


def _import(url: str, path: Path, *options: str) -> dict[str, Any]:
    done = cli(url, "import", "crontab", str(path), "--json", *options)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_a_crontab_imports_once_and_a_changed_line_updates_its_job(
    api_url: str, tmp_path: Path
) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text(CRONTAB)

    dry = _import(api_url, crontab, "--dry-run")
    assert [(j["line"], j["result"]) for j in dry["jobs"]] == [(5, "create"), (6, "create")]
    assert dry["warnings"][0]["line"] == 2 and "MAILTO" in dry["warnings"][0]["warning"]
    assert _jobs(api_url) == []  # a dry run writes nothing

    human = cli(api_url, "import", "crontab", str(crontab), "--dry-run")
    assert human.returncode == 0, human.stderr
    assert "--allow-command /bin/sh" in human.stderr and "dry run" in human.stderr
    header, *rows = human.stdout.splitlines()  # in a pipe: tab-separated, one row a line
    assert header.split("\t") == ["line", "result", "name", "schedule"]
    assert [row.split("\t")[:2] for row in rows] == [["5", "create"], ["6", "create"]]

    created = _import(api_url, crontab)
    assert [j["result"] for j in created["jobs"]] == ["created", "created"]
    jobs = {j["name"]: j for j in _jobs(api_url)}
    assert set(jobs) == {j["name"] for j in created["jobs"]}
    backup = jobs[created["jobs"][0]["name"]]
    schedule = backup["schedule"]
    assert (schedule["cron"], schedule["timezone"]) == ("30 2 * * *", "Europe/Paris")
    assert backup["action"]["argv"] == [
        "/bin/sh",
        "-c",
        '/usr/local/bin/backup.sh "$BACKUP_DIR" >/dev/null 2>&1',
    ]
    assert backup["action"]["env"] == {"BACKUP_DIR": "/var/backups"}
    mail = jobs[created["jobs"][1]["name"]]
    assert mail["schedule"]["cron"] == "0 * * * *"
    assert mail["action"]["argv"][-2:] == ["it is\nanother hour", 'mail -s "hourly" root']

    again = _import(api_url, crontab)
    assert [j["result"] for j in again["jobs"]] == ["unchanged", "unchanged"]
    assert len(_jobs(api_url)) == 2

    crontab.write_text(CRONTAB.replace("30 2 * * *", "45 3 * * 1-5"))
    dry_change = _import(api_url, crontab, "--dry-run")
    assert [j["result"] for j in dry_change["jobs"]] == ["update", "unchanged"]
    changed = _import(api_url, crontab)
    assert [j["result"] for j in changed["jobs"]] == ["updated", "unchanged"]
    after = {j["name"]: j for j in _jobs(api_url)}
    assert set(after) == set(jobs)  # no job more: the same one changed
    assert after[backup["name"]]["schedule"]["cron"] == "45 3 * * 1-5"
    assert after[backup["name"]]["version"] == backup["version"] + 1


def test_reboot_or_a_bad_line_imports_nothing(api_url: str) -> None:
    text = "0 1 * * * /usr/bin/true\n@reboot /usr/local/bin/start-tunnel\n0 25 * * * x\n"
    # a real process, once for this command family: its entry point and exit code
    refused = cli_process(api_url, "import", "crontab", "-", stdin=text)
    assert refused.returncode == 2
    assert "line 2: @reboot is not imported" in refused.stderr
    assert "line 3: '0 25 * * *': hour: 25 is out of range" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert _jobs(api_url) == []  # not even line 1's

    accepted = cli(api_url, "import", "crontab", "-", "--json", stdin="0 1 * * * /usr/bin/true\n")
    assert accepted.returncode == 0, accepted.stderr
    assert [j["result"] for j in json.loads(accepted.stdout)["jobs"]] == ["created"]


SYSTEM = """\
SHELL=/bin/sh
# m h dom mon dow user command
17 * * * * root cd / && run-parts --report /etc/cron.hourly
*/5 * * * * www-data php /var/www/cron.php
@daily www-data /usr/local/bin/backup.sh
"""


def test_a_system_crontab_imports_one_users_lines_and_names_the_others(
    api_url: str, tmp_path: Path
) -> None:
    system = tmp_path / "cron.d-site"
    system.write_text(SYSTEM)
    www = cli(api_url, "import", "crontab", str(system), "--system", "--as-user", "www-data")
    assert www.returncode == 0, www.stderr
    assert "warning: line 3: runs as 'root', not imported" in www.stderr
    assert "--as-user root" in www.stderr
    assert "run them as their own OS user" in www.stderr
    jobs = {j["name"]: j for j in _jobs(api_url)}
    assert [(n.split("-")[1:3], j["payload"]["user"]) for n, j in sorted(jobs.items())] == [
        (["www", "data"], "www-data"),
        (["www", "data"], "www-data"),
    ]
    assert sorted(j["action"]["argv"][-1] for j in jobs.values()) == [
        "/usr/local/bin/backup.sh",
        "php /var/www/cron.php",
    ]
    again = _import(api_url, system, "--system", "--as-user", "www-data")
    assert [(j["line"], j["result"], j["user"]) for j in again["jobs"]] == [
        (4, "unchanged", "www-data"),
        (5, "unchanged", "www-data"),
    ]
    root = _import(api_url, system, "--system", "--as-user", "root", "--pool", "as-root")
    assert [(j["line"], j["result"]) for j in root["jobs"]] == [(3, "created")]
    assert len(_jobs(api_url)) == 3


def test_a_system_crontab_without_its_user_or_with_nobodys_lines_is_refused(
    api_url: str, tmp_path: Path
) -> None:
    system = tmp_path / "crontab"
    system.write_text(SYSTEM)
    alone = cli(api_url, "import", "crontab", str(system), "--system")
    assert alone.returncode == 2 and "--system needs --as-user USER" in alone.stderr
    nobody = cli(api_url, "import", "crontab", str(system), "--system", "--as-user", "backup")
    assert nobody.returncode == 2
    assert "no line runs as 'backup' (--as-user); the file's users are root, www-data" in (
        nobody.stderr
    )
    as_user = cli(api_url, "import", "crontab", str(system), "--as-user", "root")
    assert as_user.returncode == 2 and "add --system" in as_user.stderr
    user_file = cli(
        api_url, "import", "crontab", "-", "--system", "--as-user", "root",
        stdin="0 1 * * * /usr/bin/true\n",
    )  # fmt: skip
    assert user_file.returncode == 2
    assert "line 1: '/usr/bin/true' is not a user name" in user_file.stderr
    assert _jobs(api_url) == []
