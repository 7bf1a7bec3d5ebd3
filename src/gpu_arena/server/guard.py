"""An ASGI guard in front of every route: bounded bodies and frames, and only JSON that the rest of
the stack can read back and write out.

Why a guard and not per-route checks: OpenEnv's own routes (``/reset``, ``/step``, ``/ws``) parse
their input before any GPU Arena code runs, and some inputs crash them with a 500 or end the
WebSocket session (a frame that is JSON but not an object, nesting deep enough to exhaust the
parser's recursion, a binary frame). Numbers JSON cannot carry (``NaN``, ``Infinity``, ``1e400``)
and lone UTF-16 surrogates are read by Python but cannot be written back, so an action carrying
one would poison every later observation or replay of its episode. All of these are refused
here, once, for every route; a refused WebSocket frame gets a structured error frame and the
session stays open.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# OpenEnv's stateless routes pass unknown top-level keys to reset()/step() as keyword arguments;
# one named like a positional parameter is a TypeError inside OpenEnv (a 500)
_RESERVED_KEYS = {"/reset": {"self"}, "/step": {"self"}}


class _Refused(ValueError):
    pass


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:24]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    # no field takes more than 64 bits; Python would parse up to 4300 digits (and then fail later)
    if len(text) > 24:
        raise _Refused(f"integer {text[:24]}... is out of range")
    return int(text)


def _no_constant(text: str) -> Any:
    raise _Refused(f"{text} is not a JSON number")


def _too_deep(obj: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _has_lone_surrogate(obj: Any) -> bool:
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


_UNPARSED = object()


def inspect_json(text: str, max_depth: int) -> tuple[Any, str | None]:
    """Parse ``text``; return ``(value, None)``, ``(_UNPARSED, None)`` for text that is not JSON at
    all (the route answers that itself), or ``(None, problem)`` for JSON that must be refused."""
    try:
        value = json.loads(text, parse_float=_finite_float, parse_int=_bounded_int, parse_constant=_no_constant)
    except _Refused as e:
        return None, str(e)
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError:
        return _UNPARSED, None
    # the walks below only run when the cheap text checks say they could find something
    if (text.count("[") + text.count("{")) > max_depth and _too_deep(value, max_depth):
        return None, f"JSON nested deeper than {max_depth} levels"
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        return None, "string with a lone UTF-16 surrogate"
    return value, None


def _error_body(code: str, message: str, **extra: Any) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, **extra}, "detail": message}).encode()


class PayloadGuard:
    """ASGI middleware enforcing ``max_bytes`` and well-formed JSON on HTTP bodies and WebSocket frames."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, max_depth: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.app(scope, self._guarded_ws_receive(receive, send), send)
        else:
            await self.app(scope, receive, send)

    # ------------------------------------------------------------------ HTTP

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await self._respond(send, 400, "bad_content_length", "Content-Length is not a number")
                    return
        if declared is not None and declared > self.max_bytes:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body:
            problem = self._check_http_body(scope, body)
            if problem is not None:
                status, code, text = problem
                await self._respond(send, status, code, text)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _check_http_body(self, scope: Scope, body: bytes) -> tuple[int, str, str] | None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return 400, "invalid_encoding", "request body is not valid UTF-8"
        value, problem = inspect_json(text, self.max_depth)
        if problem is not None:
            return 400, "invalid_json", problem
        reserved = _RESERVED_KEYS.get(scope.get("path", ""))
        if reserved and isinstance(value, dict) and reserved & value.keys():
            return 422, "invalid_argument", f"reserved argument name: {', '.join(sorted(reserved & value.keys()))}"
        return None

    async def _too_large(self, send: Send) -> None:
        await self._respond(send, 413, "payload_too_large", f"request body exceeds {self.max_bytes} bytes",
                            limit=self.max_bytes)

    @staticmethod
    async def _respond(send: Send, status: int, code: str, message: str, **extra: Any) -> None:
        body = _error_body(code, message, **extra)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    # ------------------------------------------------------------------ WebSocket

    def _guarded_ws_receive(self, receive: Receive, send: Send) -> Receive:
        async def guarded() -> Message:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    return message
                text = message.get("text")
                if text is None:
                    raw = message.get("bytes") or b""
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        await self._ws_error(send, "INVALID_JSON", "binary frame is not UTF-8 JSON")
                        continue
                    # OpenEnv reads text frames only; a binary one would end the session
                    message = {"type": "websocket.receive", "text": text}
                if len(text) > self.max_bytes // 4 and len(text.encode("utf-8", "surrogatepass")) > self.max_bytes:
                    await self._ws_error(send, "PAYLOAD_TOO_LARGE", f"frame exceeds {self.max_bytes} bytes",
                                         limit=self.max_bytes)
                    continue
                value, problem = inspect_json(text, self.max_depth)
                if problem is None and value is not _UNPARSED and not isinstance(value, dict):
                    problem = "a message must be a JSON object with a 'type'"
                if problem is not None:
                    await self._ws_error(send, "INVALID_JSON", problem)
                    continue
                return message

        return guarded

    @staticmethod
    async def _ws_error(send: Send, code: str, message: str, **extra: Any) -> None:
        frame = {"type": "error", "data": {"message": message, "code": code, **extra}}
        await send({"type": "websocket.send", "text": json.dumps(frame)})
