"""Kubernetes CronJob manifests read as command jobs (``cronwheel import cronjob``,
decision 0052, addendum).

Each CronJob becomes the spec of a cron job running its one container's ``command`` and
``args`` on a worker, with what cronwheel has of the rest: the schedule and its
``timeZone``, ``concurrencyPolicy`` as the overlap policy, ``suspend`` as a paused job,
``startingDeadlineSeconds`` as the catch-up window (older occurrences skipped),
``activeDeadlineSeconds`` as the timeout and ``backoffLimit`` as the retries. What
cannot be carried over is said: the image is not used (a note), several containers,
an image's entrypoint or a value read from the cluster are errors naming the field.

The stream may hold several documents (``---``) and ``kind: List`` (what ``kubectl get
cronjobs -o yaml`` prints); documents of other kinds are skipped with a warning.
Pure: no I/O, no clock. The CLI compares the specs with the jobs already there.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cronwheel.core.crontab import CrontabError, Notice
from cronwheel.errors import InvalidInput
from cronwheel.schedule.api import validate_cron
from cronwheel.schedule.dialects import MACROS
from cronwheel.schedule.timezones import load_zone

NAME_PREFIX = "cronjob-"
"""Every imported job's name starts so: ``cronjob-NAMESPACE-NAME`` (``cronjob-NAME``
for a manifest without a namespace)."""
API_VERSIONS = ("batch/v1", "batch/v1beta1")
OVERLAP = {"Allow": "allow", "Forbid": "skip", "Replace": "replace"}
"""``concurrencyPolicy`` → overlap: ``Forbid`` skips an occurrence while a run is on."""
DEFAULT_BACKOFF_LIMIT = 6
"""Kubernetes' own default: a Job's pod is retried six times."""
# Kubernetes retries a failed pod after 10 s, doubling up to six minutes.
RETRY_INITIAL_DELAY = 10.0
RETRY_MAX_DELAY = 360.0
MAX_ATTEMPTS = 1000
DEFAULT_CATCHUP_SECONDS = 60.0
"""A job's own default; without a deadline Kubernetes starts the last missed occurrence
(of at most 100), as the default misfire policy (``fire_once``) does."""
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_PREFIX = "spec.jobTemplate.spec.template.spec"


class ManifestError(CrontabError):
    """The manifests hold documents cronwheel cannot import: every problem, by the line
    its document starts on."""


@dataclass(frozen=True)
class CronJob:
    """One CronJob as a job: where it is in the stream, and what it runs when."""

    line: int
    """The line its document (or its item of a List) starts on."""
    k8s_name: str
    """``namespace/name``, or ``name`` without a namespace."""
    name: str
    cron: str
    timezone: str
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    overlap: str
    paused: bool
    starting_deadline: int | None
    timeout_seconds: float | None
    max_attempts: int
    image: str | None

    def spec(self, *, pool: str, timeout_seconds: float) -> dict[str, Any]:
        """The job to create; its payload carries a fingerprint of everything else (the
        ``suspend`` included), by which a re-import knows the job is unchanged."""
        action: dict[str, Any] = {
            "type": "command",
            "argv": list(self.argv),
            "timeout_seconds": self.timeout_seconds or timeout_seconds,
        }
        if self.env:
            action["env"] = dict(self.env)
        if self.cwd is not None:
            action["cwd"] = self.cwd
        body: dict[str, Any] = {
            "name": self.name,
            "schedule": {"kind": "cron", "cron": self.cron, "timezone": self.timezone},
            "action": action,
            "pool": pool,
            "overlap": self.overlap,
            "retry": {
                "max_attempts": self.max_attempts,
                "initial_delay": RETRY_INITIAL_DELAY,
                "max_delay": RETRY_MAX_DELAY,
            },
        }
        if self.starting_deadline is not None:
            # Kubernetes does not start an occurrence missed by more than the deadline.
            body["catchup_seconds"] = float(self.starting_deadline)
            body["misfire"] = {"mode": "skip"}
        else:  # said, not left out: a deadline removed from the manifest is undone
            body["catchup_seconds"] = DEFAULT_CATCHUP_SECONDS
            body["misfire"] = {"mode": "fire_once"}
        canonical = json.dumps({**body, "paused": self.paused}, sort_keys=True)
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        body["payload"] = {
            "imported_from": "cronjob",
            "cronjob": self.k8s_name,
            "fingerprint": digest[:16],
        }
        return body


@dataclass
class Manifests:
    cronjobs: list[CronJob] = field(default_factory=list)
    warnings: list[Notice] = field(default_factory=list)


class _Refused(Exception):
    def __init__(self, where: str, reason: str) -> None:
        self.where, self.reason = where, reason
        super().__init__(f"{where}: {reason}")


def parse_cronjobs(text: str, *, timezone: str = "UTC") -> Manifests:
    """The CronJobs of a YAML (or JSON) stream, in order; ``timezone`` is the zone of
    those without ``spec.timeZone``. Raises :class:`ManifestError` naming every document
    it cannot import, by line and field."""
    result = Manifests()
    problems: list[Notice] = []
    taken: dict[str, int] = {}
    for line, document in _documents(text, problems):
        for at, item in _items(line, document, problems):
            kind = item.get("kind")
            label = item.get("metadata", {}).get("name") if _is_map(item.get("metadata")) else None
            if kind != "CronJob":
                shown = f"a {kind}" if isinstance(kind, str) else "a document without a kind"
                named = f" ({label})" if isinstance(label, str) else ""
                result.warnings.append(Notice(at, f"{shown}{named} is not a CronJob: skipped"))
                continue
            try:
                cronjob, notes = _cronjob(at, item, timezone)
            except _Refused as exc:
                named = f"CronJob {label}" if isinstance(label, str) else "a CronJob"
                problems.append(Notice(at, f"{named}: {exc.where}: {exc.reason}"))
                continue
            taken[cronjob.name] = taken.get(cronjob.name, 0) + 1
            if taken[cronjob.name] > 1:
                problems.append(
                    Notice(at, f"CronJob {cronjob.k8s_name} is given twice in this stream")
                )
                continue
            result.cronjobs.append(cronjob)
            result.warnings += [Notice(at, f"CronJob {cronjob.k8s_name}: {n}") for n in notes]
    if problems:
        raise ManifestError(problems)
    return result


def _documents(text: str, problems: list[Notice]) -> Iterator[tuple[int, Any]]:
    """Each document of the stream with the line it starts on; a syntax error ends the
    stream, named by its line."""
    import yaml  # only this command reads YAML

    loader = yaml.SafeLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            yield node.start_mark.line + 1, loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 0
        problems.append(Notice(line, f"not YAML: {getattr(exc, 'problem', None) or exc}"))
    finally:
        loader.dispose()


def _items(line: int, document: Any, problems: list[Notice]) -> Iterator[tuple[int, Any]]:
    """A document's objects: itself, or a ``kind: List``'s items (kubectl's output)."""
    if document is None:  # an empty document (a trailing ``---``)
        return
    if not _is_map(document):
        problems.append(Notice(line, "a document is a Kubernetes object (a mapping)"))
        return
    if document.get("kind") != "List":
        yield line, document
        return
    items = document.get("items")
    if not isinstance(items, list):
        problems.append(Notice(line, "a List: items: is not a list"))
        return
    for i, item in enumerate(items):
        if not _is_map(item):
            problems.append(Notice(line, f"a List: items[{i}]: is not a Kubernetes object"))
        else:
            yield line, item


def _is_map(value: Any) -> bool:
    return isinstance(value, dict)


def _get(obj: dict[str, Any], path: str, kind: type | tuple[type, ...], default: Any) -> Any:
    """``obj``'s value at the dotted ``path``, of ``kind``; ``default`` if it is absent."""
    value: Any = obj
    walked: list[str] = []
    for key in path.split("."):
        walked.append(key)
        if value is None:
            return default
        if not _is_map(value):
            raise _Refused(".".join(walked[:-1]), "is not a mapping")
        value = value.get(key)
    if value is None:
        return default
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise _Refused(path, f"is {value!r}, not a number")
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise _Refused(path, f"is {type(value).__name__} {value!r}, not {names}")
    return value


def _cronjob(line: int, item: dict[str, Any], timezone: str) -> tuple[CronJob, list[str]]:
    notes: list[str] = []
    version = item.get("apiVersion")
    if version not in API_VERSIONS:
        raise _Refused("apiVersion", f"{version!r}: a CronJob is {' or '.join(API_VERSIONS)}")
    name = _get(item, "metadata.name", str, None)
    if not name:
        raise _Refused("metadata.name", "is required: it names the job")
    namespace = _get(item, "metadata.namespace", str, None)
    k8s_name = f"{namespace}/{name}" if namespace else name
    cron = _schedule(_get(item, "spec.schedule", str, None))
    zone = _get(item, "spec.timeZone", str, None)
    if zone is None:
        notes.append(
            f"no spec.timeZone: its schedule is read in {timezone} (--tz), where Kubernetes"
            " reads it in the kube-controller-manager's zone"
        )
        zone = timezone
    else:
        try:
            load_zone(zone)
        except InvalidInput as exc:
            raise _Refused("spec.timeZone", exc.reason) from None
    policy = _get(item, "spec.concurrencyPolicy", str, "Allow")
    if policy not in OVERLAP:
        raise _Refused("spec.concurrencyPolicy", f"{policy!r}: expected {', '.join(OVERLAP)}")
    deadline = _get(item, "spec.startingDeadlineSeconds", int, None)
    if deadline is not None and deadline < 0:
        raise _Refused("spec.startingDeadlineSeconds", f"is {deadline}, below 0")
    timeout = _get(item, "spec.jobTemplate.spec.activeDeadlineSeconds", int, None)
    if timeout is not None and timeout < 1:
        raise _Refused("spec.jobTemplate.spec.activeDeadlineSeconds", f"is {timeout}, below 1")
    backoff = _get(item, "spec.jobTemplate.spec.backoffLimit", int, DEFAULT_BACKOFF_LIMIT)
    if backoff < 0:
        raise _Refused("spec.jobTemplate.spec.backoffLimit", f"is {backoff}, below 0")
    container, image = _container(item, notes)
    env = _env(container)
    argv = [_expand(a, env) for a in container["command"] + container.get("args", [])]
    cwd = container.get("workingDir")
    suspend = _get(item, "spec.suspend", bool, False)
    job_name = NAME_PREFIX + (f"{namespace}-{name}" if namespace else name)
    cronjob = CronJob(
        line=line,
        k8s_name=k8s_name,
        name=job_name,
        cron=cron,
        timezone=zone,
        argv=argv,
        env=env,
        cwd=cwd if isinstance(cwd, str) else None,
        overlap=OVERLAP[policy],
        paused=suspend,
        starting_deadline=deadline,
        timeout_seconds=float(timeout) if timeout is not None else None,
        max_attempts=min(backoff + 1, MAX_ATTEMPTS),
        image=image,
    )
    return cronjob, notes


def _schedule(schedule: str | None) -> str:
    where = "spec.schedule"
    if schedule is None:
        raise _Refused(where, "is required")
    text = " ".join(schedule.split())
    if text.startswith(("CRON_TZ=", "TZ=")):
        raise _Refused(where, "a zone in the schedule is not supported: use spec.timeZone")
    if text.startswith("@"):
        expression = MACROS.get(text.upper())
        if expression is None:
            raise _Refused(
                where,
                f"{text!r}: expected five fields or @yearly, @annually, @monthly, @weekly,"
                " @daily, @midnight or @hourly",
            )
        return expression
    if len(text.split()) != 5:
        raise _Refused(where, f"{text!r}: expected five fields (minute hour dom month dow)")
    try:
        validate_cron(text)
    except InvalidInput as exc:
        raise _Refused(where, f"{text!r}: {exc}") from None
    return text


def _container(item: dict[str, Any], notes: list[str]) -> tuple[dict[str, Any], str | None]:
    """The pod's one container, its command and args checked as lists of strings."""
    pod = _get(item, _PREFIX, dict, None)
    if pod is None:
        raise _Refused(_PREFIX, "is required: its container says what to run")
    if pod.get("initContainers"):
        raise _Refused(
            f"{_PREFIX}.initContainers",
            "are not imported: a job runs one command (make them a pipeline's tasks)",
        )
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers:
        raise _Refused(f"{_PREFIX}.containers", "is required: one container")
    if len(containers) > 1:
        names = ", ".join(str(c.get("name")) if _is_map(c) else "?" for c in containers)
        raise _Refused(
            f"{_PREFIX}.containers",
            f"has {len(containers)} ({names}): a job runs one command, where a pod runs"
            " its containers side by side; import one CronJob per container, or make"
            " them a pipeline's tasks",
        )
    container = containers[0]
    where = f"{_PREFIX}.containers[0]"
    if not _is_map(container):
        raise _Refused(where, "is not a mapping")
    for key in ("command", "args"):
        value = container.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            raise _Refused(f"{where}.{key}", "is not a list of strings")
    if not container.get("command"):
        raise _Refused(
            f"{where}.command",
            "is required: without it the image's entrypoint runs, which cronwheel does not"
            " know (images are not used); write the program and its arguments",
        )
    if container.get("envFrom"):
        raise _Refused(
            f"{where}.envFrom", "is not imported: give each variable in env with its value"
        )
    image = container.get("image")
    if isinstance(image, str):
        notes.append(
            f"the image {image} is not used: the command runs on the worker's machine,"
            " as the worker's OS user; its program must be there"
        )
    if pod.get("volumes") or container.get("volumeMounts"):
        notes.append("its volumes are not mounted: the command sees the worker's files")
    return container, image if isinstance(image, str) else None


def _env(container: dict[str, Any]) -> dict[str, str]:
    where = f"{_PREFIX}.containers[0].env"
    listed = container.get("env") or []
    if not isinstance(listed, list):
        raise _Refused(where, "is not a list")
    env: dict[str, str] = {}
    for i, var in enumerate(listed):
        if not _is_map(var) or not isinstance(var.get("name"), str):
            raise _Refused(f"{where}[{i}]", "has no name")
        if "valueFrom" in var:
            raise _Refused(
                f"{where}[{i}].valueFrom",
                f"{var['name']}: a value from the cluster (a Secret, a ConfigMap) is not"
                " read: give it as value (cronwheel stores secret values sealed,"
                " docs/actions.md#secrets)",
            )
        value = var.get("value", "")
        if not isinstance(value, str):
            raise _Refused(f"{where}[{i}].value", f"is {value!r}, not a string (quote it)")
        env[var["name"]] = _expand(value, env)  # as Kubernetes: earlier variables only
    return env


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)``: a variable of the container's env replaced by its value,
    ``$$`` a ``$``, a reference to an unknown variable left as it is."""

    def replace(found: re.Match[str]) -> str:
        name = found.group(1)
        if name is None:
            return "$"
        return env.get(name, found.group(0))

    return _REFERENCE.sub(replace, text)
