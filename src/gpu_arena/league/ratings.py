"""Ratings, cross-play and self-play from a league's played matches.

Ratings come from OpenSkill's Plackett–Luce model: in each cross-play match the entrants are
ranked by their surplus over their BATNA (ties share a rank; the world's archetypes in leftover
seats are not rated), and the matches are replayed in schedule order, so a league's ratings are a
function of its matches alone, however many runs played them. The conservative score is
``mu − 3·sigma`` (OpenSkill's ordinal). Self-play matches (one entrant in every seat) do not move
ratings: they are compared with the entrant's cross-play instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from openskill.models import PlackettLuce

from ..core.opponents import DEFAULT_OPPONENTS
from ..evaluation.stats import bootstrap_ci, deal_gain_share


def _ranks(surpluses: list[float]) -> list[float]:
    """1 for the best; equal surpluses share the better rank."""
    return [1.0 + sum(other > s + 1e-12 for other in surpluses) for s in surpluses]


def _mean_ci(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "ci": None, "n": 0}
    low, high = bootstrap_ci(values)
    return {"mean": sum(values) / len(values), "ci": [low, high], "n": len(values)}


def rate(records: Iterable[Mapping[str, Any]], entrants: Iterable[str]) -> dict[str, Any]:
    """The league table: per entrant ``mu``, ``sigma``, ``conservative``, ``matches`` (cross-play
    matches played), ``mean_surplus`` (cross-play, with CI), ``self_play`` (its mean surplus per
    seat in self-play, with CI) and ``bargaining`` over its cross-play deals (``deals``, its mean
    ``gain_share`` of each deal's joint gain, ``ir_violations``: deals that lowered its own
    potential, ``not_pareto``: deals after which reallocating the two labs' blocks would still
    have raised their joint value), best conservative score first; and the cross-play matrix."""
    model = PlackettLuce()
    names = sorted(set(entrants))
    players = {e: model.rating(name=e) for e in names}
    cross: dict[str, list[float]] = {e: [] for e in names}
    selfp: dict[str, list[float]] = {e: [] for e in names}
    pairs: dict[tuple[str, str], list[float]] = {}
    shares: dict[str, list[float]] = {e: [] for e in names}  # its share of each deal's joint gain
    violations = dict.fromkeys(names, 0)  # deals that left it below where it stood before them
    deal_count = dict.fromkeys(names, 0)
    inefficient = dict.fromkeys(names, 0)  # its deals that left joint gain on the table
    pair_matches: dict[tuple[str, str], list[int]] = {}
    pair_refs: dict[tuple[str, str], list[str]] = {}
    for rec in sorted(records, key=lambda r: int(r["index"])):
        seats = [s for s in rec["seats"] if s["entrant"] != DEFAULT_OPPONENTS and s["entrant"] in players]
        if rec["self_play"]:
            for s in seats:
                selfp[s["entrant"]].append(float(s["surplus"]))
            continue
        by_lab = {s["lab"]: s["entrant"] for s in seats}
        for deal in rec.get("deals", ()):
            for lab, gain in zip(deal["labs"], deal["gains"], strict=True):
                entrant = by_lab.get(lab)
                if entrant is None:
                    continue
                deal_count[entrant] += 1
                if (deal.get("left_on_table") or 0.0) > 1e-6:
                    inefficient[entrant] += 1
                share = deal_gain_share(deal, lab)
                if share is not None:
                    shares[entrant].append(share)
                if gain < -1e-9:
                    violations[entrant] += 1
        for s in seats:
            cross[s["entrant"]].append(float(s["surplus"]))
            for other in seats:
                if other["entrant"] != s["entrant"]:
                    key = (s["entrant"], other["entrant"])
                    pairs.setdefault(key, []).append(float(s["surplus"]))
                    pair_matches.setdefault(key, []).append(int(rec["index"]))
                    if "ref" in rec:
                        pair_refs.setdefault(key, []).append(str(rec["ref"]))
        if len(seats) < 2:
            continue
        teams = [[players[s["entrant"]]] for s in seats]
        rated = model.rate(teams, ranks=_ranks([float(s["surplus"]) for s in seats]))
        for s, (new,) in zip(seats, rated, strict=True):
            players[s["entrant"]] = new
    surplus = {e: _mean_ci(cross[e]) for e in names}  # one bootstrap per entrant
    table = []
    for e in names:
        p = players[e]
        table.append({"name": e, "mu": p.mu, "sigma": p.sigma, "conservative": p.ordinal(),
                      "matches": len(cross[e]), "mean_surplus": surplus[e]["mean"],
                      "surplus_ci": surplus[e]["ci"], "self_play": _mean_ci(selfp[e]),
                      "bargaining": {"deals": deal_count[e], "gain_share": _mean_ci(shares[e]),
                                     "ir_violations": violations[e], "not_pareto": inefficient[e]}})
    table.sort(key=lambda row: (-row["conservative"], row["name"]))
    matrix = [{"entrant": a, "opponent": b, **_mean_ci(values), "match_indices": pair_matches[(a, b)],
               "refs": pair_refs.get((a, b), [])} for (a, b), values in sorted(pairs.items())]
    return {"entrants": table, "cross_play": matrix}
