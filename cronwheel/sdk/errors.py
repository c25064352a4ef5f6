"""The API's problem+json errors as exceptions; each carries the problem details.

ApiError                  any error answer; .status, .problem, .field, .detail
├── BadRequest            400 body is not JSON
├── Unauthorized          401 no or unknown token
├── Forbidden             403 the key's role may not do this
├── NotFoundError         404 no such resource for this tenant
├── ConflictError         409 name taken, wrong state, stale fence, idempotency reuse
├── StaleVersionError     412 If-Match named an old version
├── PayloadTooLarge       413
├── ValidationFailed      422 a field is wrong: .field names it
├── PreconditionRequired  428 If-Match missing
├── RateLimited           429 over a quota: .retry_after seconds
└── Unavailable           503 the store cannot be reached
"""

from __future__ import annotations

from typing import Any

from cronwheel.errors import CronwheelError


class ApiError(CronwheelError):
    status = 0

    def __init__(
        self, status: int, problem: dict[str, Any], retry_after: float | None = None
    ) -> None:
        self.status = status
        self.problem = problem
        self.field: str | None = problem.get("field")
        self.detail: str = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
        self.retry_after = retry_after
        super().__init__(f"{status}: {self.detail}")


class BadRequest(ApiError): ...


class Unauthorized(ApiError): ...


class Forbidden(ApiError): ...


class NotFoundError(ApiError): ...


class ConflictError(ApiError): ...


class StaleVersionError(ConflictError): ...


class PayloadTooLarge(ApiError): ...


class ValidationFailed(ApiError): ...


class PreconditionRequired(ApiError): ...


class RateLimited(ApiError): ...


class Unavailable(ApiError): ...


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFoundError,
    409: ConflictError,
    412: StaleVersionError,
    413: PayloadTooLarge,
    422: ValidationFailed,
    428: PreconditionRequired,
    429: RateLimited,
    503: Unavailable,
}


def error_for(status: int, problem: dict[str, Any], retry_after: float | None = None) -> ApiError:
    return _BY_STATUS.get(status, ApiError)(status, problem, retry_after)
