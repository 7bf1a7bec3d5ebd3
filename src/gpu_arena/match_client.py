"""MatchSeat: one remote seat of a live match (``/api/matches``), for a program that holds it.

It depends on the wire models only (never on the server or the environment), like
:mod:`gpu_arena.client`::

    match_id, seats = MatchSeat.create("http://127.0.0.1:8000", task="market_round", seed=3,
                                       seats={"lab_0": "remote", "lab_1": "remote"})
    seats["lab_0"].play(my_policy)          # act once per round until the end (another thread or
                                            # process holds lab_1)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

import httpx

from .client import action_payload
from .models import ArenaObservation


class MatchError(RuntimeError):
    """The server refused a request: ``status`` (401, 403, 404, 409, 410, 422, 429) and its ``code``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class MatchSeat:
    """A remote seat: read its own view, send one action a round, wait for the round to resolve.

    Contract: every request carries the seat's token (``Authorization: Bearer``); a refused one
    raises :class:`MatchError` with the server's code; nothing here sees another seat's view.
    """

    def __init__(self, base_url: str, match_id: str, seat: str, token: str, *, timeout: float = 30.0) -> None:
        self.match_id, self.seat = match_id, seat
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})

    @classmethod
    def create(cls, base_url: str, *, seats: Mapping[str, str], task: str = "market_round", split: str = "train",
               seed: int | None = None, round_timeout_s: float = 30.0, judge_mode: str = "none",
               timeout: float = 30.0) -> tuple[str, dict[str, MatchSeat]]:
        """Start a match (``seats``: seat -> ``remote``, ``archetypes``, a policy name or ``llm:...``);
        the match id and a :class:`MatchSeat` for each remote seat."""
        body = {"task": task, "split": split, "seats": dict(seats), "round_timeout_s": round_timeout_s,
                "judge_mode": judge_mode, **({"seed": seed} if seed is not None else {})}
        with httpx.Client(timeout=timeout) as http:
            created = _answer(http.post(f"{base_url.rstrip('/')}/api/matches", json=body))
        return created["match_id"], {seat: cls(base_url, created["match_id"], seat, token, timeout=timeout)
                                     for seat, token in created["tokens"].items()}

    def state(self) -> dict[str, Any]:
        """The seat's state (round, done, acted, waiting_for, notice, replay_id), ``observation`` an
        :class:`ArenaObservation`."""
        state = _answer(self._http.get(f"/api/matches/{self.match_id}/seats/{self.seat}"))
        state["observation"] = ArenaObservation.model_validate(state["observation"])
        return state

    def observe(self) -> ArenaObservation:
        obs: ArenaObservation = self.state()["observation"]
        return obs

    def act(self, action: Any) -> dict[str, Any]:
        """Send this round's action (an ``ArenaAction``, a dict or a core ``Action``): the server's
        acceptance (``round``, ``resolved``, ``waiting_for``)."""
        return _answer(self._http.post(f"/api/matches/{self.match_id}/seats/{self.seat}/act",
                                       json=action_payload(action)))

    def wait_for_round(self, after: int, *, poll_s: float = 0.05, timeout_s: float | None = None) -> dict[str, Any]:
        """Poll until the match is past round ``after`` (or over); the seat's state then."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            state = self.state()
            if state["done"] or state["round"] > after:
                return state
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"round {after} of match {self.match_id} did not resolve in {timeout_s} s")
            time.sleep(poll_s)

    def play(self, policy: Any, *, poll_s: float = 0.05) -> dict[str, Any]:
        """Play the seat to the end with ``policy`` (anything with ``act(observation)``): one action
        a round, on the seat's own observation. The seat's last state."""
        while True:
            state = self.state()
            if state["done"]:
                return state
            if not state["acted"]:
                self.act(policy.act(state["observation"]))
            state = self.wait_for_round(state["round"], poll_s=poll_s)
            if state["done"]:
                return state

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MatchSeat:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _answer(response: httpx.Response) -> dict[str, Any]:
    body: Any = None
    with contextlib.suppress(ValueError):  # a proxy's HTML error page: reported by status below
        body = response.json()
    if response.status_code >= 400:
        error = (body or {}).get("error", {}) if isinstance(body, dict) else {}
        raise MatchError(response.status_code, str(error.get("code", f"http_{response.status_code}")),
                         str(error.get("message", response.text[:200])))
    if not isinstance(body, dict):
        raise MatchError(response.status_code, "invalid_response", "the server did not answer a JSON object")
    return body


__all__ = ["MatchError", "MatchSeat"]
