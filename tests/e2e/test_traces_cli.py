"""``cronwheel dev`` traces when OTEL_* asks for it: a real process, the console exporter."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx

from tests.e2e.procs import cronwheel, free_port
from tests.engine.helpers import eventually
from tests.engine.webhook_target import webhook_target

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


async def test_dev_exports_the_attempt_span_linked_to_the_creating_request(
    tmp_path: Path,
) -> None:
    port, log = free_port(), tmp_path / "dev.log"
    args = ["dev", "--db", f"sqlite:///{tmp_path / 'dev.db'}", "--port", str(port)]
    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "dev-under-test"}
    with (
        webhook_target() as target,
        cronwheel(*args, env=env, log=log) as proc,
    ):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as api:

            async def created() -> bool:
                spec = {
                    "name": "traced-hook",
                    "schedule": {"kind": "immediate"},
                    "action": {"type": "webhook", "url": f"{target.url}/hook"},
                }
                try:
                    answer = await api.post("/v1/jobs", json=spec, headers={"traceparent": CALLER})
                except httpx.TransportError:
                    return False
                assert answer.status_code == 201, answer.text
                return True

            await eventually(created, timeout=60)

            async def called() -> bool:
                return bool(target.received)

            await eventually(called, timeout=60)
        proc.send_signal(signal.SIGTERM)  # spans are flushed as the process ends
        assert proc.wait(timeout=120) == 0
    out = log.read_text()
    [received] = target.received
    sent = {k.lower(): v for k, v in received.headers.items()}
    attempt_trace = sent["traceparent"].split("-")[1]
    # The spans went out at exit: the attempt's (its trace is the one the webhook got),
    # linked into the caller's trace, and the API's, in the caller's trace.
    assert '"name": "cronwheel.attempt webhook"' in out, out
    assert f'"trace_id": "0x{attempt_trace}"' in out
    assert '"name": "cronwheel.api create jobs"' in out
    assert out.count(f'"trace_id": "0x{CALLER_TRACE}"') >= 2  # the API's span and the link
    assert '"service.name": "dev-under-test"' in out
