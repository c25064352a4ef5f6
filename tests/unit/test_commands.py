"""Command actions, the pure parts (issue 30 item 1): the spec's validation, the
operator's allow-list, the output tails, how an exit becomes an outcome, and secret
variables sealed, opened and masked like a webhook's secret headers."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from cronwheel.actions.command import _Ended, command_env, stdin_body
from cronwheel.actions.context import RunContext
from cronwheel.core.jobspec import JobSpec
from cronwheel.core.lifecycle import OutcomeKind
from cronwheel.errors import InvalidInput
from cronwheel.security.commands import AllowList, pattern_problem
from cronwheel.security.output import Tail
from cronwheel.security.redact import mask_action
from cronwheel.security.sealing import (
    Sealer,
    generate_key,
    is_sealed,
    keep_masked,
    open_action,
    reseal_action,
    seal_action,
    sent_secrets,
)


def parse(action: dict[str, Any], **job: Any) -> JobSpec:
    return JobSpec.parse({"name": "j", "schedule": {"kind": "immediate"}, "action": action, **job})


def command(*argv: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "argv": list(argv), **extra}


@pytest.mark.parametrize(
    ("action", "field", "words"),
    [
        (command(), "action.argv", "is empty"),
        (command(""), "action.argv", "must be a command name"),
        (command("bin/backup"), "action.argv", "not a relative path"),
        (command("/opt/./x"), "action.argv", "not a plain absolute path"),
        (command("/opt/x/"), "action.argv", "not a plain absolute path"),
        (command("ls", "a\x00b"), "action.argv", "NUL"),
        (command("ls", env={"1X": "v"}), "action.env", "letters, digits and '_'"),
        (command("ls", env={"ld_preload": "x"}), "action.env.ld_preload", "dynamic loader"),
        (
            command("ls", env={"DYLD_INSERT_LIBRARIES": "x"}),
            "action.env.DYLD_INSERT_LIBRARIES",
            "loader",
        ),
        (command("ls", env={"Path": "/x"}), "action.env.Path", "PATH"),
        (command("ls", env={"cronwheel_fence": "9"}), "action.env.cronwheel_fence", "CRONWHEEL_"),
        (command("ls", env={"A": "a\x00"}), "action.env.A", "NUL"),
        (command("ls", cwd="relative"), "action.cwd", "absolute"),
        (command("ls", permanent_exit_codes=[256]), "action.permanent_exit_codes", "1 to 255"),
        (command("ls", permanent_exit_codes=[True]), "action.permanent_exit_codes.0", "integer"),
        (command("ls", secret_env=["B"], env={"A": "1"}), "action.secret_env", "'B'"),
        (command("ls", shell=True), "action.shell", ""),
        (command("ls", timeout_seconds=0), "action.timeout_seconds", ""),
    ],
)
def test_bad_specs_name_their_field(action: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        parse(action).to_job(tenant_id="t", now=datetime.now(UTC))
    assert raised.value.field == field
    assert words in raised.value.reason


def test_a_spec_reads_back_as_written() -> None:
    full = command(
        "pg_dump",
        "-f",
        "/backups/db.sql",
        env={"PGHOST": "db", "PGPASSWORD": "pw"},
        cwd="/backups",
        timeout_seconds=600.0,
        permanent_exit_codes=[2],
        secret_env=["PGHOST"],
    )
    assert parse(full).action.model_dump() == full
    assert parse(command("true")).action.model_dump() == command("true")


def test_the_job_takes_the_command_timeout_unless_it_gives_its_own() -> None:
    assert parse(command("x", timeout_seconds=3600)).timeout_seconds == 3600
    assert parse(command("x")).timeout_seconds == 300
    shorter = parse(command("x", timeout_seconds=30), timeout_seconds=60)
    assert shorter.to_job(tenant_id="t", now=datetime.now(UTC)).timeout_seconds == 60
    with pytest.raises(InvalidInput) as raised:
        parse(command("x", timeout_seconds=90), timeout_seconds=60).to_job(
            tenant_id="t", now=datetime.now(UTC)
        )
    assert raised.value.field == "action.timeout_seconds"


@pytest.mark.parametrize(
    ("patterns", "program", "allowed"),
    [
        ((), "ls", False),
        (("pg_dump",), "pg_dump", True),
        (("pg_dump",), "/usr/bin/pg_dump", False),  # a name pattern is not a path
        (("/usr/bin/pg_dump",), "pg_dump", False),  # nor a path pattern a name
        (("/usr/bin/pg_dump",), "/usr/bin/pg_dump", True),
        (("backup-*",), "backup-db", True),
        (("backup-*",), "restore-db", False),
        (("/opt/jobs/*",), "/opt/jobs/nightly", True),
        (("/opt/jobs/*",), "/opt/jobsx/nightly", False),
        (("/opt/jobs/*",), "nightly", False),
        (("PG_DUMP",), "pg_dump", False),  # case matters, as on the file system
        (("*",), "/anything/at/all", True),
        (("*",), "rm", True),
    ],
)
def test_allow_patterns(patterns: tuple[str, ...], program: str, allowed: bool) -> None:
    assert AllowList(patterns).allows(program) is allowed


@pytest.mark.parametrize("pattern", ["", "  ", "bin/*", "a\x00"])
def test_bad_patterns_are_refused(pattern: str) -> None:
    assert pattern_problem(pattern) is not None
    with pytest.raises(ValueError, match="--allow-command"):
        AllowList([pattern])


def test_a_tail_keeps_the_last_bytes_and_says_how_many_went() -> None:
    tail = Tail(limit=10)
    assert tail.text(()) == ""
    tail.add(b"hello\n")
    assert tail.text(()) == "hello\n"
    for _ in range(100):
        tail.add(b"0123456789")
    text = tail.text(())
    assert text == "[… 996 bytes before this not kept …]\n0123456789"


def test_a_secret_cut_by_the_limit_is_still_redacted() -> None:
    secret = "s3cr3t-value-0123"
    tail = Tail(limit=20)
    tail.add(b"x" * 100 + f"key={secret} done".encode())
    assert "s3cr3t" not in tail.text({secret})
    assert tail.text({secret}).endswith("*** done")


def _ended(
    code: int | None, ending: OutcomeKind | None = None, permanent: frozenset[int] = frozenset()
) -> Any:
    return _Ended("pg_dump", code, ending, 5.0, permanent).outcome("out\n", "boom\n")


def test_exits_become_outcomes() -> None:
    ok = _ended(0)
    assert ok.kind is OutcomeKind.SUCCEEDED
    assert json.loads(ok.output) == {"exit_code": 0, "stdout": "out\n", "stderr": "boom\n"}
    failed = _ended(3)
    assert (failed.kind, failed.error_class) == (OutcomeKind.FAILED, "ExitCode")
    assert failed.error_message == "pg_dump exited with code 3: boom"
    assert _ended(3, permanent=frozenset({3})).kind is OutcomeKind.PERMANENT
    killed = _ended(-9)
    assert (killed.kind, killed.error_class) == (OutcomeKind.FAILED, "Signal")
    assert json.loads(killed.output)["signal"] == "SIGKILL"
    assert _ended(-15, OutcomeKind.TIMED_OUT).kind is OutcomeKind.TIMED_OUT
    assert _ended(-15, OutcomeKind.CANCELLED).kind is OutcomeKind.CANCELLED


def _ctx() -> RunContext:
    return RunContext(
        run_id=7,
        job_id="job-1",
        job_name="dump",
        scheduled_for=datetime(2030, 1, 1, tzinfo=UTC),
        attempt=2,
        fence=3,
        payload={"db": "main"},
        tenant_id="acme",
    )


def test_the_environment_is_the_run_identity_and_the_action_env_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CRONWHEEL_SECRETS_KEY", "never-for-a-command")
    monkeypatch.setenv("CRONWHEEL_DB", "postgresql://u:pw@db/x")
    env = command_env({"env": {"PGHOST": "db"}}, _ctx())
    assert "CRONWHEEL_SECRETS_KEY" not in env and "CRONWHEEL_DB" not in env
    assert env["PGHOST"] == "db"
    assert (env["CRONWHEEL_RUN_ID"], env["CRONWHEEL_ATTEMPT"], env["CRONWHEEL_FENCE"]) == (
        "7",
        "2",
        "3",
    )
    assert env["CRONWHEEL_IDEMPOTENCY_KEY"] == "job-1:2030-01-01T00:00:00+00:00"
    assert json.loads(stdin_body(_ctx()))["payload"] == {"db": "main"}


def test_secret_variables_are_sealed_opened_masked_and_kept_like_secret_headers() -> None:
    sealer = Sealer([generate_key()])
    action = command(
        "pg_dump", env={"PGPASSWORD": "pw-123456", "TARGET": "t-123456"}, secret_env=["TARGET"]
    )
    sealed = seal_action(action, "acme", sealer)
    assert is_sealed(sealed["env"]["PGPASSWORD"]) and is_sealed(sealed["env"]["TARGET"])
    assert mask_action(sealed)["env"] == {"PGPASSWORD": "***", "TARGET": "***"}
    assert open_action(sealed, "acme", sealer)["env"] == action["env"]
    assert {"pw-123456", "t-123456"} <= sent_secrets(open_action(sealed, "acme", sealer), sealed)
    # Sent back as read, for the same command: the stored values stay.
    shown = mask_action(sealed)
    assert keep_masked(shown, sealed)["env"] == sealed["env"]
    # For another command line, a stored secret is not carried (else printenv gets it).
    other = {**shown, "argv": ["printenv"]}
    with pytest.raises(InvalidInput) as raised:
        keep_masked(other, sealed)
    assert raised.value.field == "action.env.PGPASSWORD"
    assert reseal_action(sealed, "acme", sealer) is None  # nothing to do on the first key


def test_a_secret_variable_without_a_key_is_refused() -> None:
    with pytest.raises(InvalidInput) as raised:
        seal_action(command("x", env={"API_TOKEN": "tok-123456"}), "acme", None)
    assert raised.value.field == "action.env.API_TOKEN"
    assert "secret variable" in raised.value.reason


def test_the_cli_shows_a_command_and_its_output_safely() -> None:
    from cronwheel.cli.describe import action_words, attempt_lines

    action = command("pg_dump", "-f", "my file.sql", env={"PGPASSWORD": "pw-123456", "A": "1"})
    assert action_words(action) == [
        "command pg_dump -f 'my file.sql'",
        "  PGPASSWORD=***",
        "  A=1",
    ]
    stdout = "".join(f"line {i}\n" for i in range(30)) + "evil \x1b[2J\n"
    output = {"exit_code": 3, "signal": None, "stdout": stdout, "stderr": "boom\n"}
    lines = attempt_lines({"attempt": 1, "outcome": "failed", "output": output})
    at = lines.index("    exit      code 3")
    assert lines[at + 1] == "    stdout (its last 10 lines; --json shows more)"
    assert lines[at + 2 : at + 12][-1] == "      evil \\x1b[2J"
    assert lines[-2:] == ["    stderr", "      boom"]


def test_the_console_line_of_a_command_shows_its_last_line_of_output() -> None:
    from cronwheel.console.events import Event, Kind
    from cronwheel.console.lines import describe
    from cronwheel.core.model import Attempt, AttemptOutcome

    at = datetime(2030, 1, 1, tzinfo=UTC)
    output = json.dumps(
        {"exit_code": 0, "stdout": "dumped 12 tables\n\x1b[31mdone\n", "stderr": ""}
    )
    attempt = Attempt(1, "t", 7, "j", 1, "w", 1, at, at, AttemptOutcome.SUCCEEDED, output=output)
    text, _ = describe(Event(at, Kind.ENDED, "dump", attempt=attempt, attempt_number=1))
    assert text.endswith("succeeded in 0 ms — \\x1b[31mdone"), text
