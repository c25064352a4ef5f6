"""What a run does: a Python handler or a webhook."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cronwheel.actions.context import CancelFlag, RunCancelled, RunContext
from cronwheel.actions.handler import HandlerRegistry, PermanentError
from cronwheel.security.signing import sign, verify

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    # The HTTP stack is imported with the first webhook, not by every worker (PEP 562).
    if name == "WebhookAction":
        from cronwheel.actions.webhook import WebhookAction

        return WebhookAction
    raise AttributeError(f"module 'cronwheel.actions' has no attribute {name!r}")
