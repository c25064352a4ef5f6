"""The Python SDK for cronwheel's HTTP API."""

from cronwheel.sdk import errors
from cronwheel.sdk.client import AsyncClient, Client
from cronwheel.sdk.models import (
    AttemptInfo,
    AuditInfo,
    BackfillInfo,
    CheckpointInfo,
    JobInfo,
    KeyInfo,
    LastRunInfo,
    NoticeInfo,
    NotificationInfo,
    Page,
    PipelineInfo,
    PipelineRunInfo,
    PipelineTaskInfo,
    PipelineVersionInfo,
    ProgressInfo,
    RunInfo,
    TenantInfo,
)

__all__ = [
    "AsyncClient",
    "AttemptInfo",
    "AuditInfo",
    "BackfillInfo",
    "CheckpointInfo",
    "Client",
    "JobInfo",
    "KeyInfo",
    "LastRunInfo",
    "NoticeInfo",
    "NotificationInfo",
    "Page",
    "PipelineInfo",
    "PipelineRunInfo",
    "PipelineTaskInfo",
    "PipelineVersionInfo",
    "ProgressInfo",
    "RunInfo",
    "TenantInfo",
    "errors",
]
