"""A rated league: entrants (any policy name) meet in rotating seats of holdout worlds; OpenSkill
ratings, a cross-play matrix and self-play against cross-play (``gpu-arena league run|show``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ..native.report import engine_counts
from ..policies import DEFAULT_OPPONENTS, make_policy
from .play import SeatResult, play_match
from .ratings import rate
from .schedule import LeagueMatch, league_key, scheduled
from .store import connect_league, ensure_league, leagues, load_matches, played_count, save_matches


def run_league(entrants: list[str], tasks: list[str], matches: int, seed: int, *, db: str | None = None,
               workers: int = 1, backend: str = "process", ray_address: str | None = None,
               progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Play the next ``matches`` matches of the league ``(entrants, tasks, seed)`` (after those the
    store already holds), store them, and return the league's table over all of its matches.
    ``backend``: ``process`` (a pool of ``workers`` processes) or ``ray`` (Ray tasks, on a private
    local instance or the cluster at ``ray_address``, as evaluation runs them)."""
    if backend not in ("process", "ray"):
        raise ValueError(f"unknown backend {backend!r}; expected process or ray")
    for name in entrants:
        if name != DEFAULT_OPPONENTS:
            make_policy(name)  # an unknown name fails here, before any match is played
    league = league_key(entrants, tasks, seed)
    con = connect_league(db)
    try:
        ensure_league(con, league, entrants, tasks, seed)
        start = played_count(con, league)
        todo = [scheduled(entrants, tasks, seed, k) for k in range(start, start + matches)]
        records: list[dict[str, Any]] = []

        def take(_match: Any, record: dict[str, Any]) -> None:
            records.append(record)
            if progress:
                progress(1)

        if backend == "ray":
            from ..evaluation.runner import run_on_ray

            run_on_ray(play_match, todo, workers, ray_address, take, names=entrants)
            records.sort(key=lambda r: int(r["index"]))  # Ray hands results back as they finish
        elif workers <= 1:
            for m in todo:
                take(m, play_match(m))
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                for m, record in zip(todo, pool.map(play_match, todo, chunksize=max(1, len(todo) // (4 * workers))),
                                     strict=True):
                    take(m, record)
        save_matches(con, league, records)
        stored = load_matches(con, league)
        return {"league": league, "tasks": tasks, "seed": seed, "played": len(records), "total": len(stored),
                # which engine played this run's matches (gpu_arena.native.report)
                "engines": engine_counts((r.get("engine", ""), r.get("engine_reason")) for r in records),
                **rate(stored, entrants)}
    finally:
        con.close()


LEAGUE_PREFIX = "league:"  # opponents "league:top3": the newest league's three best-rated entrants


def league_pool(spec: str, db: str | None = None) -> list[str]:
    """The entrants ``spec`` (``league:topK``) names: the ``K`` best by conservative score in the
    newest league of the store, best first."""
    rest = spec.removeprefix(LEAGUE_PREFIX)
    if not spec.startswith(LEAGUE_PREFIX) or not rest.startswith("top") or not rest[3:].isdigit() or int(rest[3:]) < 1:
        raise ValueError(f"expected league:topK (K >= 1), got {spec!r}")
    table = league_table(db)
    return [row["name"] for row in table["entrants"][:int(rest[3:])]]


def league_table(db: str | None = None, league: str | None = None, *, con: sqlite3.Connection | None = None
                 ) -> dict[str, Any]:
    """The table of ``league`` (default: the newest league in the store). ``con``: an open store
    connection to read instead (the dashboard's is read-only)."""
    own = con is None
    con = connect_league(db) if con is None else con
    try:
        known = leagues(con)
        if not known:
            raise LookupError("no league in the store: run `gpu-arena league run` first")
        chosen = next((x for x in known if x["league"] == league), None) if league else known[0]
        if chosen is None:
            raise LookupError(f"no league {league!r}; leagues: {', '.join(x['league'] for x in known)}")
        stored = load_matches(con, chosen["league"])
        return {"league": chosen["league"], "tasks": chosen["tasks"], "seed": chosen["seed"], "total": len(stored),
                **rate(stored, chosen["entrants"])}
    finally:
        if own:
            con.close()


__all__ = ["LEAGUE_PREFIX", "LeagueMatch", "SeatResult", "league_key", "league_pool", "league_table", "play_match", "rate", "run_league",
           "scheduled"]
