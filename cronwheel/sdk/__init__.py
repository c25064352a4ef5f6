"""The Python SDK for cronwheel's HTTP API."""

from cronwheel.sdk import errors
from cronwheel.sdk.client import AsyncClient, Client
from cronwheel.sdk.models import (
    AttemptInfo,
    BackfillInfo,
    JobInfo,
    KeyInfo,
    LastRunInfo,
    NoticeInfo,
    Page,
    RunInfo,
    TenantInfo,
)

__all__ = [
    "AsyncClient",
    "AttemptInfo",
    "BackfillInfo",
    "Client",
    "JobInfo",
    "KeyInfo",
    "LastRunInfo",
    "NoticeInfo",
    "Page",
    "RunInfo",
    "TenantInfo",
    "errors",
]
