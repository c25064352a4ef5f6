"""Commands: a command line run by a worker as a child process, per attempt.

No shell (unless ``argv`` names one); the executable must be one the worker's operator
allowed (:class:`AllowList`, ``cronwheel worker --allow-command PATTERN``): tenants are
hostile, and a worker that allows nothing runs no command. Exit 0 succeeds; another exit
fails and is retried under the job's policy, but for the codes the action declares
``permanent_exit_codes`` (the dead letter at once). The last 64 KiB of stdout and of
stderr are kept with the attempt, redacted of the secret variables the command was given
(:mod:`cronwheel.security.output`, the rule a remote worker's output is kept by too).

Nothing a command starts outlives its attempt unnoticed: it runs under a supervisor
(cronwheel.actions._lifeline) in a process group of its own, and the supervisor stops
the whole group (SIGTERM, then SIGKILL after the grace) when the worker lets go of it:
a timeout, a cancel, a lost lease, or the worker's own death (SIGKILL included: the
kernel closes the pipe the supervisor watches). What a command leaves running in its
group when it exits is stopped the same way, before the attempt is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cronwheel.actions.context import RunContext, run_envelope
from cronwheel.core.lifecycle import Outcome, OutcomeKind
from cronwheel.core.text import escape_controls
from cronwheel.security.commands import AllowList
from cronwheel.security.output import Tail, output_record
from cronwheel.security.sealing import (
    Sealer,
    SecretsKeyMissing,
    SecretUnreadable,
    open_action,
    sent_secrets,
)

GRACE_SECONDS = 10.0
"""How long a command being stopped has between SIGTERM and SIGKILL (the default of
``cronwheel worker --command-grace``)."""
MAX_ERROR_TEXT = 500
"""Characters of stderr (its end) in the attempt's error message."""
PIPE_DRAIN_SECONDS = 2.0
"""How long the output is read after the command's group is gone: a process that left
the group (setsid) may hold the pipes; it is not waited for."""
LIFELINE = Path(__file__).with_name("_lifeline.py")
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
"""What a command gets of the worker's environment (nothing else: the worker's own
secrets, its store's DSN, stay with it). ``PATH`` is how a command name is found."""


def stdin_body(ctx: RunContext) -> bytes:
    """What a command reads on stdin: the run's JSON envelope, as a webhook's body."""
    return run_envelope(ctx)


def command_env(action: Mapping[str, Any], ctx: RunContext) -> dict[str, str]:
    """A command's environment: a few of the worker's variables (:data:`INHERITED_ENV`),
    the action's own, then the run's identity as ``CRONWHEEL_*`` (which no job sets), and
    ``TRACEPARENT`` (``TRACESTATE``) while tracing is on."""
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env |= {str(k): str(v) for k, v in dict(action.get("env") or {}).items()}
    env |= {
        "CRONWHEEL_RUN_ID": str(ctx.run_id),
        "CRONWHEEL_JOB_ID": ctx.job_id,
        "CRONWHEEL_JOB_NAME": ctx.job_name,
        "CRONWHEEL_TENANT_ID": ctx.tenant_id,
        "CRONWHEEL_ATTEMPT": str(ctx.attempt),
        "CRONWHEEL_FENCE": str(ctx.fence),
        "CRONWHEEL_IDEMPOTENCY_KEY": ctx.idempotency_key,
        "CRONWHEEL_SCHEDULED_FOR": ctx.scheduled_for.isoformat(),
    }
    if ctx.pipeline_run_id is not None:
        env |= {"CRONWHEEL_PIPELINE_RUN_ID": ctx.pipeline_run_id, "CRONWHEEL_TASK": str(ctx.task)}
    # The attempt's span, in the environment carrier OpenTelemetry's SDKs read: the
    # command's own trace continues it.
    env |= {name.upper(): value for name, value in (ctx.trace or {}).items()}
    return env


async def _read(stream: asyncio.StreamReader | None, tail: Tail) -> None:
    if stream is None:
        return
    while chunk := await stream.read(65536):
        tail.add(chunk)


async def _feed(stream: asyncio.StreamWriter | None, body: bytes) -> None:
    """Write the envelope to stdin and close it; a command that does not read it is not
    an error (nor waited for: the pipe's buffer may fill)."""
    if stream is None:
        return
    with contextlib.suppress(OSError):  # BrokenPipe, ConnectionReset: it did not read
        stream.write(body)
        await stream.drain()
        stream.close()


class CommandAction:
    """Runs command runs, the executables ``allow`` permits only. ``sealer`` opens the
    jobs' encrypted variables just before each start; ``grace_seconds``: how long a
    command being stopped has between SIGTERM and SIGKILL."""

    def __init__(
        self,
        allow: AllowList | Sequence[str] = (),
        *,
        sealer: Sealer | None = None,
        grace_seconds: float = GRACE_SECONDS,
        worker_id: str = "this worker",
    ) -> None:
        self.allow = allow if isinstance(allow, AllowList) else AllowList(allow)
        self.sealer = sealer
        self.grace_seconds = grace_seconds
        self.worker_id = worker_id

    async def execute(self, action: Mapping[str, Any], ctx: RunContext, timeout: float) -> Outcome:
        """Run the command once; ``timeout``: the job's (the action's own, if shorter,
        applies too). Cancelling the calling task stops the command's group and returns
        a CANCELLED outcome with the output so far (the worker's timeouts, cancels and
        releases cancel it)."""
        stored = action
        try:
            action = open_action(action, ctx.tenant_id, self.sealer)
        except SecretsKeyMissing as exc:
            return Outcome(OutcomeKind.PERMANENT, "SecretsKeyMissing", str(exc))
        except SecretUnreadable as exc:
            return Outcome(OutcomeKind.PERMANENT, "SecretUnreadable", str(exc))
        argv = [str(a) for a in action.get("argv") or ()]
        refused = self._refusal(argv, action)
        if isinstance(refused, Outcome):
            return refused
        executable, cwd = refused
        secrets = sent_secrets(action, stored)
        own = action.get("timeout_seconds")
        limit = min(timeout, float(own)) if isinstance(own, int | float) else None
        return await self._run(action, ctx, argv, executable, cwd, limit, secrets)

    def _refusal(self, argv: list[str], action: Mapping[str, Any]) -> Outcome | tuple[str, str]:
        """The executable and the directory to run in, or the outcome of a command this
        worker cannot run (retried: another worker of the pool may)."""
        if not argv or not argv[0]:
            return Outcome(OutcomeKind.PERMANENT, "InvalidCommand", "argv is empty")
        program = argv[0]
        found = program if program.startswith("/") else None
        if not program.startswith("/"):
            found = shutil.which(program, path=os.environ.get("PATH", os.defpath))
        if not self.allow.allows(program):
            return Outcome(
                OutcomeKind.FAILED,
                "CommandNotAllowed",
                f"worker {self.worker_id} does not run {program!r}: its operator did not allow"
                " it (cronwheel worker --allow-command PATTERN)",
            )
        if found is None or not os.access(found, os.X_OK) or os.path.isdir(found):
            return Outcome(
                OutcomeKind.FAILED,
                "CommandNotFound",
                f"{program!r} is not an executable on worker {self.worker_id}"
                + ("" if program.startswith("/") else " (looked up on its PATH)"),
            )
        cwd = str(action.get("cwd") or "/")
        if not os.path.isdir(cwd):
            return Outcome(
                OutcomeKind.FAILED,
                "NoSuchDirectory",
                f"cwd {cwd!r} is not a directory on worker {self.worker_id}",
            )
        return found, cwd

    async def _run(
        self,
        action: Mapping[str, Any],
        ctx: RunContext,
        argv: list[str],
        executable: str,
        cwd: str,
        limit: float | None,
        secrets: set[str],
    ) -> Outcome:
        lifeline, held = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                str(LIFELINE),
                str(lifeline),
                str(self.grace_seconds),
                executable,
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=command_env(action, ctx),
                cwd=cwd,
                start_new_session=True,
                pass_fds=(lifeline,),
            )
        except BaseException:
            os.close(held)
            raise
        finally:
            os.close(lifeline)
        out, err = Tail(), Tail()
        io = [
            asyncio.ensure_future(_read(proc.stdout, out)),
            asyncio.ensure_future(_read(proc.stderr, err)),
        ]
        feeding = asyncio.ensure_future(_feed(proc.stdin, stdin_body(ctx)))
        ending: OutcomeKind | None = None
        try:
            await asyncio.wait_for(proc.wait(), limit)
        except TimeoutError:
            ending = OutcomeKind.TIMED_OUT
        except asyncio.CancelledError:
            ending = OutcomeKind.CANCELLED
        finally:
            # Shielded: a second cancel (a timeout, then the worker's release) must not
            # leave the command running with nobody waiting for it.
            await asyncio.shield(self._let_go(proc, held, io, feeding))
        permanent = frozenset(int(c) for c in action.get("permanent_exit_codes") or ())
        ended = _Ended(argv[0], proc.returncode, ending, limit, permanent)
        return ended.outcome(out.text(secrets), err.text(secrets))

    async def _let_go(
        self,
        proc: asyncio.subprocess.Process,
        held: int,
        io: Sequence[asyncio.Future[None]],
        feeding: asyncio.Future[None],
    ) -> None:
        """Break the lifeline (the supervisor stops the group if it still runs) and wait
        for the supervisor and the output."""
        os.close(held)
        try:
            await asyncio.wait_for(proc.wait(), self.grace_seconds + 10)
        except TimeoutError:  # the supervisor itself stuck: it must not be waited forever
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        feeding.cancel()
        _, pending = await asyncio.wait(io, timeout=PIPE_DRAIN_SECONDS)
        for task in (*pending, feeding):
            task.cancel()
        await asyncio.gather(*io, feeding, return_exceptions=True)


class _Ended:
    """How a command ended, and the outcome that makes."""

    def __init__(
        self,
        program: str,
        code: int | None,
        ending: OutcomeKind | None,
        limit: float | None,
        permanent: frozenset[int],
    ) -> None:
        self.program, self.code, self.ending = program, code, ending
        self.limit, self.permanent = limit, permanent

    def outcome(self, stdout: str, stderr: str) -> Outcome:
        code = self.code
        signal_name = _signal_name(-code) if code is not None and code < 0 else None
        output = output_record(None if signal_name else code, signal_name, stdout, stderr)
        program = self.program
        if self.ending is OutcomeKind.TIMED_OUT:
            message = f"{program} did not finish within its timeout of {self.limit:g} s; stopped"
            return Outcome(OutcomeKind.TIMED_OUT, "Timeout", message, output=output)
        if self.ending is OutcomeKind.CANCELLED:
            message = f"{program} was stopped: the run was cancelled or its worker let it go"
            return Outcome(OutcomeKind.CANCELLED, "Cancelled", message, output=output)
        if code == 0:
            return Outcome(OutcomeKind.SUCCEEDED, output=output)
        why = f"exited with code {code}" if signal_name is None else f"was killed by {signal_name}"
        # One line, nothing a terminal would obey: the message is shown everywhere.
        last = escape_controls(stderr.rstrip()[-MAX_ERROR_TEXT:])
        message = f"{program} {why}" + (f": {last}" if last else "")
        if code in self.permanent:
            return Outcome(OutcomeKind.PERMANENT, "ExitCode", message, output=output)
        kind = "ExitCode" if signal_name is None else "Signal"
        return Outcome(OutcomeKind.FAILED, kind, message, output=output)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
