"""Live-match throughput of a real server process, as JSON: match rounds per second with several
remote seats.

Run: ``make bench`` (or ``python bench/bench_matches.py --seconds 3``).

A server process is started on a free port of 127.0.0.1. ``matches`` matches run at once, each with
``remote`` remote seats (the other seats play the world's archetypes on the server); every remote
seat is an asyncio client (httpx) that reads its seat, sends a random well-formed action built
from its own observation, and waits for the round to resolve, episode after episode, for about
``seconds``. Reported: resolved rounds per second over all matches, remote actions per second, the
p50/p99 latency of an action request, the server's RSS, and the calibration ratio of
``bench_core`` (rounds per calibration unit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import load_calib
from bench_server import free_port, rss_mb, start_server
from gpu_arena.client import action_payload
from gpu_arena.models import ArenaObservation
from gpu_arena.native.report import EngineReport, engine_counts
from gpu_arena.policies import make_policy


async def seat_client(client: httpx.AsyncClient, match_id: str, seat: str, token: str, seed: int,
                      latencies: list[float]) -> tuple[int, EngineReport | None]:
    """Play one remote seat to the end of its match; the number of actions it sent, and which
    engine played the match (its last observation's ``metadata.engine``)."""
    policy = make_policy("random_valid", seed=seed)
    headers = {"Authorization": f"Bearer {token}"}
    sent = 0
    while True:
        state = (await client.get(f"/api/matches/{match_id}/seats/{seat}", headers=headers)).json()
        if state["done"]:
            meta = (state.get("observation") or {}).get("metadata") or {}
            return sent, EngineReport.from_dict(meta.get("engine"))
        if state["acted"]:
            await asyncio.sleep(0.001)
            continue
        obs = ArenaObservation.model_validate(state["observation"])
        t0 = time.perf_counter()
        r = await client.post(f"/api/matches/{match_id}/seats/{seat}/act", headers=headers,
                              json=action_payload(policy.act(obs)))
        latencies.append(time.perf_counter() - t0)
        if r.status_code != 202:
            raise SystemExit(f"act answered {r.status_code}: {r.text[:200]}")
        sent += 1


async def match_loop(url: str, task: str, remote: int, index: int, deadline: float,
                     latencies: list[float], played: list[EngineReport | None]) -> tuple[int, int]:
    """Matches one after another until ``deadline``, at least one: (rounds resolved, remote actions
    sent); ``played`` is told which engine played each match.

    At least one because on a loaded machine opening the client alone can outlast a short
    ``deadline``, and a measurement of no match says nothing about throughput."""
    rounds = actions = 0
    seed = first_seed = index * 1000
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while seed == first_seed or time.monotonic() < deadline:
            seats = {f"lab_{i}": "remote" for i in range(remote)}
            r = await client.post("/api/matches", json={"task": task, "seed": seed, "seats": seats,
                                                        "round_timeout_s": 60})
            if r.status_code != 201:
                raise SystemExit(f"create answered {r.status_code}: {r.text[:200]}")
            created = r.json()
            sent = await asyncio.gather(*(seat_client(client, created["match_id"], seat, token, seed + k, latencies)
                                          for k, (seat, token) in enumerate(sorted(created["tokens"].items()))))
            state = (await client.get(f"/api/matches/{created['match_id']}")).json()
            rounds += state["round"]
            actions += sum(n for n, _engine in sent)
            played.append(sent[0][1] if sent else None)
            seed += 1
    return rounds, actions


async def measure(url: str, task: str, matches: int, remote: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    played: list[EngineReport | None] = []
    t0 = time.monotonic()
    results = await asyncio.gather(*(match_loop(url, task, remote, i, t0 + seconds, latencies, played)
                                     for i in range(matches)))
    elapsed = time.monotonic() - t0
    rounds = sum(r for r, _a in results)
    actions = sum(a for _r, a in results)
    ordered = sorted(latencies)
    return {"matches": matches, "remote_seats": remote, "seconds": elapsed, "rounds": rounds,
            "rounds_per_s": rounds / elapsed, "remote_actions_per_s": actions / elapsed,
            "act_p50_ms": statistics.median(ordered) * 1e3 if ordered else 0.0,
            "act_p99_ms": ordered[int(0.99 * (len(ordered) - 1))] * 1e3 if ordered else 0.0,
            "engines": engine_counts(played)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--task", default="market_round")
    parser.add_argument("--remote", type=int, default=3, help="remote seats per match")
    parser.add_argument("--matches", default="1,8", help="comma-separated numbers of concurrent matches")
    args = parser.parse_args(argv)
    calib = load_calib()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = start_server(port, str(Path(tmp) / "arena.db"))
        try:
            url = f"http://127.0.0.1:{port}"
            before = calib.calib_ops_per_s(1.0)
            rows: list[dict[str, Any]] = [asyncio.run(measure(url, args.task, int(n), args.remote, args.seconds))
                                          for n in args.matches.split(",")]
            after = calib.calib_ops_per_s(1.0)
            rss = rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    calib_mean = (before + after) / 2
    for row in rows:
        row["rounds_per_calib"] = row["rounds_per_s"] / calib_mean
    print(json.dumps({"benchmark": "matches", "task": args.task, "calib_ops_per_s_mean": calib_mean,
                      "server_rss_mb": rss, "runs": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
