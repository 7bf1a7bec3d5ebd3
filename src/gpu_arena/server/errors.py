"""Structured errors of the HTTP API: ``{"error": {"code", "message", ...}}`` with a 4xx status."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    code: str = Field(description="stable, machine-readable error code")
    message: str = Field(description="what went wrong, for people")


class ErrorBody(BaseModel):
    """The body of every 4xx answer of the GPU Arena routes (and of bad requests to OpenEnv's routes)."""

    error: ErrorDetail
    detail: Any = Field(default=None, description="FastAPI-style detail, kept for OpenEnv HTTP clients")


class ArenaRequestError(ValueError):
    """A client's mistake, raised anywhere below a route and answered with ``status`` and a structured body.

    It subclasses ``ValueError`` so that in-process callers (and OpenEnv's WebSocket handler, which
    reports any exception as an ``EXECUTION_ERROR`` frame) see an ordinary bad-argument error.
    """

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.extra = extra or {}


class InvalidResetArguments(ArenaRequestError):
    status = 422
    code = "invalid_reset_arguments"


class UnknownSplit(ArenaRequestError):
    status = 404
    code = "unknown_split"


class SessionNotFound(ArenaRequestError):
    status = 404
    code = "session_not_found"


class SessionGone(ArenaRequestError):
    """The session existed but was closed (``session_closed``) or expired (``session_expired``)."""

    status = 410
    code = "session_expired"


class CapacityReached(ArenaRequestError):
    status = 429
    code = "capacity_reached"


class EpisodeNotFound(ArenaRequestError):
    status = 404
    code = "episode_not_found"


class ReplayMismatch(ArenaRequestError):
    """A stored episode does not replay to its own transcript (recorded by other code, or damaged)."""

    status = 409
    code = "replay_mismatch"


class TrainingRunNotFound(ArenaRequestError):
    status = 404
    code = "training_run_not_found"


class InvalidForkStep(ArenaRequestError):
    status = 422
    code = "invalid_fork_step"


class SessionExpiredError(SessionGone):
    """Raised by a served environment once it was closed (reaper, DELETE, idle): never a stale episode."""


def error_response(status: int, code: str, message: str, *, detail: Any = None,
                   headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"error": {"code": code, "message": message, **extra}}
    body["detail"] = message if detail is None else detail
    return JSONResponse(body, status_code=status, headers=headers)


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error statuses a route can answer."""
    return {c: {"model": ErrorBody, "description": _DESCRIPTIONS.get(c, "error")} for c in codes}


_DESCRIPTIONS = {
    400: "bad request", 404: "not found", 409: "the stored episode does not replay to its transcript",
    410: "the session was closed or expired",
    413: "request body too large", 422: "invalid arguments", 429: "too many open sessions",
}
