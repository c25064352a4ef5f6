"""What a run does: a Python handler or a webhook."""

from cronwheel.actions.context import CancelFlag, RunCancelled, RunContext
from cronwheel.actions.handler import HandlerRegistry, PermanentError
from cronwheel.actions.signing import sign, verify
from cronwheel.actions.webhook import WebhookAction

__all__ = [
    "CancelFlag",
    "HandlerRegistry",
    "PermanentError",
    "RunCancelled",
    "RunContext",
    "WebhookAction",
    "sign",
    "verify",
]
