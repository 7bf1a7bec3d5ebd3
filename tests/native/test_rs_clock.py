"""The Rust clock, shocks, emergency auctions and rule judge against the Python core
(``rules/clock.py``, ``shocks.py``, ``rules/auctions.py``, ``judge.py``): the same stage results
and the same world after every round change of real episodes, the same answer to every pitch."""

from __future__ import annotations

import contextlib
import copy
import math
import re
from collections import Counter
from types import ModuleType
from typing import Any

import pytest
from helpers_rs import canon, episode_worlds, py_tick, world_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_arena.core import judge as pyjudge
from gpu_arena.core.rules import (
    ActionError,
    expire,
    final_settlement,
    resolve_auctions,
    settle_due_jobs,
    start_blocks,
)
from gpu_arena.core.rules.auctions import counter_pitch, make_pitch
from gpu_arena.core.shocks import fire_due_shocks
from gpu_arena.core.types import (
    SHOCK_KINDS,
    TASKS,
    Action,
    Auction,
    AuctionStatus,
    Pitch,
    ScheduledShock,
    World,
)

SEEDS = {"single_trade": range(4), "market_round": range(11), "coalition_market": range(8)}


def py_auction_apply(world: World, lab_id: str, action: Action) -> tuple[Any, dict[str, Any]]:
    """``make_pitch``/``counter_pitch`` on a copy of ``world``, in the shape of ``py_apply``."""
    handler = {"make_pitch": make_pitch, "counter_pitch": counter_pitch}[action.action_type]
    w = copy.deepcopy(world)
    try:
        out = handler(w, lab_id, action)
    except ActionError as e:
        return (False, (e.code, e.message)), world_state(w)
    return (True, (out.category, sorted(out.affected), out.note, out.breaches)), world_state(w)


def open_auction(world: World) -> Any:
    """The auction ``make_pitch`` would pitch for, if any."""
    return next((a for a in world.auctions.values()
                 if a.status == AuctionStatus.OPEN and world.round_index < a.close_round), None)


def tick_in_place(world: World) -> None:
    """``py_tick``'s stages applied to ``world`` itself."""
    world.round_index += 1
    start_blocks(world)
    expire(world)
    resolve_auctions(world)
    settle_due_jobs(world)
    fire_due_shocks(world)
    if world.round_index >= world.max_rounds:
        final_settlement(world)


def check_tick(rs: ModuleType, world: World, seen: Counter[str]) -> None:
    """The Rust round change of ``world`` is Python's; ``seen`` counts what it exercised."""
    ours, theirs = rs.clock_tick(world), py_tick(world)
    assert canon(ours) == canon(theirs), (world.task, world.seed, world.round_index)
    stages, state = theirs
    for e in state["events"][len(world.events):]:
        seen[e[1]] += 1
    seen["breach_stage"] += bool(stages[2])
    seen["lapsed_stage"] += bool(stages[1])
    seen["final"] += len(stages) == 7
    for jid, job in state["jobs"].items():
        if world.jobs[jid].status == "open" and job["status"] != "open":
            seen["job_" + job["status"]] += 1
    for kind, old in (("offer", world.offers), ("coalition", world.coalitions)):
        for oid, o in state[kind + "s"].items():
            if oid in old and old[oid].status != o["status"]:
                seen[f"{kind}_{o['status']}"] += 1
    for aid, a in state["auctions"].items():
        if aid in world.auctions and world.auctions[aid].status == "open" and a["status"] != "open":
            seen[f"auction_{a['status']}_{world.judge_mode}"] += 1


def test_every_round_change_of_real_episodes(rs: ModuleType) -> None:
    seen: Counter[str] = Counter()
    for task in TASKS:
        for seed in SEEDS[task]:
            for judge_mode in ("none", "rule"):
                for episode, _moves in episode_worlds(task, seed, mix=seed, judge_mode=judge_mode):
                    if not episode.done:
                        check_tick(rs, episode.world, seen)
    assert {k for k in seen if k in SHOCK_KINDS} == set(SHOCK_KINDS), seen
    for key in ("auction_awarded_none", "auction_unsold_none", "auction_awarded_rule", "auction_unsold_rule",
                "job_completed", "job_partial", "job_failed", "lapsed_stage", "final"):
        assert seen[key] > 0, (key, seen)


def test_windows_opening_on_conditioned_and_committed_blocks(rs: ModuleType) -> None:
    """Blocks bought under must_allocate_to_job that open unused are breaches; committed ones run
    and honour their coalition (the policies rarely leave either to the clock)."""
    seen: Counter[str] = Counter()
    for task, seed, mix in (("market_round", 2, 2), ("coalition_market", 2, 2), ("coalition_market", 5, 2),
                            ("coalition_market", 1, 2), ("coalition_market", 10, 0)):
        for episode, _moves in episode_worlds(task, seed, mix=mix):
            if episode.done:
                continue
            w = copy.deepcopy(episode.world)
            for k, b in enumerate(w.blocks.values()):
                if b.owner is not None and b.start_round == w.round_index + 1 and b.status in ("free", "reserved"):
                    if k % 4 == 0:
                        b.status = "reserved"
                    elif k % 4 == 1:
                        b.must_allocate = True
                    elif k % 4 == 2:
                        b.status = "committed"
            w.labs[next(iter(w.labs))].reputation = 0.99
            for k, c in enumerate(w.coalitions.values()):
                committed = [bid for ids in c.commitments.values() for bid in ids]
                if c.status == "proposed" and committed and (k + w.round_index) % 3:
                    w.blocks[committed[-1]].status = "idle"  # no longer committable: the proposal fails
            check_tick(rs, w, seen)
    assert seen["breach"] > 3 and seen["breach_stage"] > 3 and seen["lapsed_stage"] > 0, seen
    assert seen["coalition_failed"] > 0 and seen["coalition_settled"] > 0, seen


CLAIMS = ("I need {hours} GPU-hours by round {deadline}", "{hours} gpu-h, deadline is round {deadline}",
          "urgent: {hours}hours before round {deadline}", "{hours} GPUh until round {deadline}",
          "critical critical critical", "", "   spaced   ", "{hours}.0 hours needed; deadline at round 99")


def claim(world: World, lab_id: str, k: int) -> str:
    """A pitch message: true, half-true or false claims about the lab's first open job."""
    jobs = [j for j in world.jobs.values() if j.owner == lab_id and j.status == "open"]
    hours, deadline = (jobs[0].gpu_hours_required, jobs[0].deadline_round) if jobs else (7, 3)
    if k % 3 == 1:
        hours += 1
    if k % 5 == 2:
        deadline += 2
    return CLAIMS[k % len(CLAIMS)].format(hours=hours, deadline=deadline)


MAGNITUDES = {"energy_spike": (1.3, 2.2), "demand_surge": (1.2, 1.6), "reliability_downgrade": (0.08, 0.3)}


def test_every_shock_kind_on_many_states(rs: ModuleType) -> None:
    """Each kind of shock fired on states it seldom meets in the tasks' schedules: several at once,
    on committed, allocated and pooled holdings, at every round, with magnitudes across the ranges."""
    seen: Counter[str] = Counter()
    for task, seed, mix in (("market_round", 4, 1), ("coalition_market", 2, 2), ("coalition_market", 1, 2),
                            ("single_trade", 0, 0)):
        for n, (episode, _moves) in enumerate(episode_worlds(task, seed, mix=mix)):
            if episode.done:
                continue
            w = copy.deepcopy(episode.world)
            kinds = [SHOCK_KINDS[(n + i) % len(SHOCK_KINDS)] for i in range(1 + n % 3)]
            w.shock_schedule = [
                ScheduledShock(w.round_index + 1, kind, round(lo + (hi - lo) * ((n * 7 + i) % 10) / 9, 4))
                for i, kind in enumerate(kinds) for lo, hi in [MAGNITUDES.get(kind, (0.0, 0.9999))]]
            check_tick(rs, w, seen)
            committed = [b for b in w.blocks.values() if b.status == "committed" and b.start_round > w.round_index + 1]
            if committed:  # a failure can only hit a coalition's commitment: it is excused
                for b in w.blocks.values():
                    if b.status in ("free", "reserved", "allocated", "running"):
                        b.status = "idle"
                w.shock_schedule = [ScheduledShock(w.round_index + 1, "capacity_failure", 0.5)]
                check_tick(rs, w, seen)
                seen["committed_failed"] += 1
    assert {k for k in seen if k in SHOCK_KINDS} == set(SHOCK_KINDS), seen
    assert seen["committed_failed"] > 0, seen


# (judge mode, bids, reputations, whether the labs' jobs are closed): equal bids rank by
# reputation, then by lab id; equal scores (no job to value, no claim, one reputation) by bid
VARIANTS = (("rule", "budget", None, False), ("none", "budget", None, False), ("none", "equal", "spread", False),
            ("none", "equal", "equal", False), ("rule", "equal", "equal", False), ("rule", "ladder", "equal", True))


def test_pitched_auctions_resolve_alike(rs: ModuleType) -> None:
    """Every lab pitches (and some counter-pitch) on the open auctions of real episodes, with true
    and false claims, equal and different bids; the rounds that follow, up to the award, change
    alike under both judge modes."""
    seen: Counter[str] = Counter()
    checked = 0
    for task in TASKS:
        for seed in (1, 3, 7) if task != "single_trade" else (1, 2):
            for episode, _moves in episode_worlds(task, seed, mix=seed, judge_mode="rule"):
                auction = open_auction(episode.world)
                if auction is None or episode.done:
                    continue
                for judge_mode, bids, reputations, close_jobs in VARIANTS:
                    w = copy.deepcopy(episode.world)
                    w.judge_mode = judge_mode
                    labs = list(w.labs)
                    equal_bids = bids != "budget"
                    for j in w.jobs.values() if close_jobs else ():
                        j.status = "failed"
                    for k, lid in enumerate(labs):
                        if reputations is not None:
                            w.labs[lid].reputation = 0.5 if reputations == "equal" else 0.3 + 0.1 * ((k * 3) % 5)
                        bid = {"equal": 1.0, "ladder": 1.0 + k}.get(bids, round(w.labs[lid].budget * (0.05 + 0.1 * k), 2))
                        jobs = [j.job_id for j in w.jobs.values() if j.owner == lid and j.status == "open"]
                        text = "please" if equal_bids else claim(w, lid, k + seed)
                        act = Action("make_pitch", payment=bid, message=text, job_id=jobs[-1] if jobs and k % 2 else None)
                        check_apply(rs, w, lid, act)
                        with contextlib.suppress(ActionError):
                            make_pitch(w, lid, act)
                    for k, lid in enumerate(labs[:2] if not equal_bids else ()):
                        rival = labs[(k + 1) % len(labs)]
                        if rival in w.auctions[auction.auction_id].pitches:
                            act = Action("counter_pitch", target_lab_id=rival, message=claim(w, lid, k + 2),
                                         payment=w.auctions[auction.auction_id].pitches[rival].bid + 1.0)
                            check_apply(rs, w, lid, act)
                            with contextlib.suppress(ActionError):
                                counter_pitch(w, lid, act)
                    while not w.done and w.auctions[auction.auction_id].status == "open":
                        check_tick(rs, w, seen)
                        checked += 1
                        tick_in_place(w)
                break
    assert checked > 5
    assert seen["auction_awarded_rule"] > 0 and seen["auction_awarded_none"] > 0, seen


def check_apply(rs: ModuleType, world: World, lab_id: str, action: Action) -> Any:
    """The Rust answer to a pitch (and the world after it) is Python's; returns Python's answer."""
    ours = rs.auctions_apply(world, lab_id, action)
    theirs = py_auction_apply(world, lab_id, action)
    assert canon(ours) == canon(theirs), (action, ours[0], theirs[0])
    return theirs[0]


def auction_states() -> list[World]:
    """States of real episodes with an auction open for pitches, and one without."""
    out = []
    for task, seed in (("single_trade", 1), ("market_round", 7), ("coalition_market", 3), ("coalition_market", 6)):
        for episode, moves in episode_worlds(task, seed, mix=seed, judge_mode="rule"):
            if open_auction(episode.world) is not None:
                w = copy.deepcopy(episode.world)
                # the seats' own pitches first, so that there are rivals to counter
                for lid, m in moves.items():
                    if m.action_type == "make_pitch":
                        make_pitch(w, lid, m)
                out.append(w)
    out.append(next(iter(episode_worlds("market_round", 0)))[0].world)
    return out


STATES = auction_states()


def test_real_pitches(rs: ModuleType) -> None:
    codes: Counter[Any] = Counter()
    for task in TASKS:
        for seed in range(6):
            for episode, moves in episode_worlds(task, seed, mix=seed, judge_mode="rule"):
                for lid, m in moves.items():
                    if m.action_type in ("make_pitch", "counter_pitch"):
                        codes[check_apply(rs, episode.world, lid, m)[0]] += 1
    assert codes[True] > 3, codes


ODD_AMOUNTS = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10**8), st.floats(allow_nan=True, allow_infinity=True),
    st.floats(0, 5000), st.sampled_from([0.0, -0.0, 1e7, 1e7 + 1, 1e-9, 2.0**-1074]), st.text(max_size=3),
    st.lists(st.integers(-5, 5), max_size=2))
ODD_IDS = st.one_of(st.none(), st.integers(-2, 2), st.text(max_size=6),
                    st.sampled_from(["lab_0", "lab_1", "lab_2", "lab_3", "lab_9", "j_1", "j_0_0", "j_1_1", "j_9_9", ""]))
TEXTS = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=40), st.text(min_size=495, max_size=505),
                  st.sampled_from(["  need 8 GPU-hours by round 4  ", "\x1c pitch \x1f", "x" * 500, "x" * 501]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at=st.integers(0, len(STATES) - 1), who=st.integers(0, 4), kind=st.sampled_from(["make_pitch", "counter_pitch"]),
       payment=ODD_AMOUNTS, job_id=ODD_IDS, target=ODD_IDS, message=TEXTS, budget_frac=st.floats(0, 1.2))
def test_made_up_pitches(rs: ModuleType, at: int, who: int, kind: str, payment: Any, job_id: Any, target: Any,
                         message: Any, budget_frac: float) -> None:
    world = STATES[at]
    labs = list(world.labs)
    lab_id = labs[who % len(labs)]
    if isinstance(payment, float) and math.isfinite(payment) and payment > 0 and budget_frac < 1.1:
        payment = world.labs[lab_id].budget * budget_frac  # around the budget: the 1e-9 tolerance
    jobs = [j.job_id for j in world.jobs.values() if j.owner == lab_id]
    if job_id == "j_1" and jobs:
        job_id = jobs[0]
    if isinstance(target, int) and not isinstance(target, bool) and target >= 0:
        target = labs[target % len(labs)]
    check_apply(rs, world, lab_id, Action(kind, payment=payment, job_id=job_id, target_lab_id=target, message=message))


def test_counter_pitches_at_and_around_the_rival_bid(rs: ModuleType) -> None:
    seen: Counter[str] = Counter()
    for world in STATES:
        a = open_auction(world)
        if a is None:
            seen[check_apply(rs, world, "lab_0", Action("counter_pitch", target_lab_id="lab_1"))[1][0]] += 1
            continue
        for rival, p in a.pitches.items():
            for lid in world.labs:
                for bid in (p.bid, math.nextafter(p.bid, math.inf), p.bid + 0.005, world.labs[lid].budget + 1e-9,
                            world.labs[lid].budget + 2e-9, None):
                    res = check_apply(rs, world, lid, Action("counter_pitch", target_lab_id=rival, payment=bid,
                                                             message="beat 5 hours by round 3"))
                    seen[res[1][0] if not res[0] else "ok"] += 1
    for code in ("ok", "pitch_too_low", "self_trade", "no_contested_resource"):
        assert seen[code] > 0, seen


# ---------------------------------------------------------------- the rule judge's claim patterns

PIECES = st.sampled_from([
    "gpu", "GPU", "gPu", "-", " ", "\t", "\x1c", "\u2003", "\xa0", "h", "H", "hour", "HOURS", "hours", "s", "ſ", "_", "é",
    "1", "12", "3.5", ".", "0", "٣", "߀", "１", "by", "BY", "before", "until", "deadline", "DEADLINE", "is", "İs", "ıs",
    "at", "round", "ROUND", "x", "\n", "ħ", "ǅ", "²", "Ⅻ", "gpu-hours", "gpu h", "deadline is at round ", "by round ",
])
CLAIM_TEXTS = st.one_of(st.lists(PIECES, max_size=14).map("".join), st.text(max_size=30),
                        st.lists(st.one_of(PIECES, st.characters(blacklist_categories=("Cs",))), max_size=14).map("".join))


@settings(max_examples=1000, deadline=None)
@given(text=CLAIM_TEXTS)
def test_claim_patterns_match_pythons(rs: ModuleType, text: str) -> None:
    assert rs.judge_find_claims(text) == (pyjudge.HOURS_RE.findall(text), pyjudge.DEADLINE_RE.findall(text))


def test_claim_patterns_on_written_claims(rs: ModuleType) -> None:
    texts = ["I need 12 GPU-hours by round 4", "12gpuhours 3.5 gpu h 7 hour_ 8 hoursx 9 HOURS. 10 gpu-hx",
             "deadline is at round 5, deadline island round 6, deadline  at  round 007", "by round ٣",
             "BEFORE ROUND 12 until round 1 by  round", "1.2.3 hours 4. hours 5 .6 hours", "ſ 3 hourſ, 4 gpuſ",
             "İs deadline İs round 4 deadline ıs round 5", "9" * 400 + " hours", "by round " + "0" * 30 + "12"]
    found = 0
    for text in texts:
        ours = rs.judge_find_claims(text)
        assert ours == (pyjudge.HOURS_RE.findall(text), pyjudge.DEADLINE_RE.findall(text)), text
        found += len(ours[0]) + len(ours[1])
    assert found > 12


def test_rule_scores_of_every_pitch(rs: ModuleType) -> None:
    """The rule judge's score, parts and reasons for every pitch of the pitched states (claims
    true, half-true and false)."""
    compared = 0
    for world in STATES:
        w = copy.deepcopy(world)
        a = open_auction(w)
        if a is None:
            continue
        for k, lid in enumerate(w.labs):
            with contextlib.suppress(ActionError):
                make_pitch(w, lid, Action("make_pitch", payment=1.0, message=claim(w, lid, k)))
        ours = rs.judge_rule_scores(w, a.auction_id)
        theirs = {lab: {"lab_id": s.lab_id, "score": s.score, "urgency": s.urgency, "evidence": s.evidence,
                        "fairness": s.fairness, "reasons": s.reasons, "model": s.model, "adjustment": s.adjustment}
                  for lab, s in pyjudge.rule_scores(w, a).items()}
        assert canon(ours) == canon(theirs)
        compared += len(theirs)
    assert compared > 8


def claim_number(world: World, pitch: Any, pick: int, k: int) -> str:
    """A number a pitch might claim about the job the judge checks it against: its requirement,
    what is still missing, its deadline (written in other ways too), or another number."""
    job = pyjudge._pitch_job(world, pitch)
    if job is None or pick == 0:
        return str(k)
    missing = job.gpu_hours_required - pyjudge.valid_hours(world, job)
    return str([job.gpu_hours_required, missing, job.deadline_round, f"{job.gpu_hours_required}.0",
                "0" + str(job.deadline_round), str(missing + 1), missing, missing][pick % 8])


CLAIM_PARTS = st.lists(st.one_of(PIECES, st.sampled_from(["<n>", " hours ", " by round ", " gpu-h "])), max_size=10)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at=st.integers(0, len(STATES) - 2), parts=st.lists(st.tuples(CLAIM_PARTS, st.integers(0, 7), st.integers(0, 40),
                                                                     st.one_of(st.none(), ODD_IDS)), min_size=1, max_size=5),
       won=st.one_of(st.none(), st.integers(0, 4)))
def test_rule_scores_of_made_up_claims(rs: ModuleType, at: int, parts: list[Any], won: int | None) -> None:
    """The rule judge on made-up claims, true and false, with and without an earlier win."""
    w = copy.deepcopy(STATES[at])
    a = open_auction(w)
    assert a is not None
    if won is not None:  # an earlier auction won: fairness drops
        winner = list(w.labs)[won % len(w.labs)]
        w.auctions["a_won"] = Auction("a_won", a.block_id, 0, 0, status="awarded", winner=winner, price=1.0)
    for i, (pieces, pick, k, job_id) in enumerate(parts):
        lid = list(w.labs)[i % len(w.labs)]
        pitch = a.pitches[lid] = Pitch(lid, 1.0, job_id if isinstance(job_id, str) else None, "", w.round_index)
        pitch.message = "".join(claim_number(w, pitch, pick, k) if p == "<n>" else p for p in pieces)
    theirs = {lab: [s.score, s.urgency, s.evidence, s.fairness, s.reasons] for lab, s in pyjudge.rule_scores(w, a).items()}
    ours = {lab: [s["score"], s["urgency"], s["evidence"], s["fairness"], s["reasons"]]
            for lab, s in rs.judge_rule_scores(w, a.auction_id).items()}
    assert canon(ours) == canon(theirs)


def test_an_unknown_judge_mode_is_refused_like_python(rs: ModuleType) -> None:
    for world in STATES:
        a = open_auction(world)
        if a is None:
            continue
        w = copy.deepcopy(world)
        w.judge_mode = "llm"
        w.round_index = a.close_round - 1
        with pytest.raises(ValueError, match=re.escape("unknown judge_mode 'llm'; known: none, rule")):
            py_tick(w)
        with pytest.raises(ValueError, match=re.escape("unknown judge_mode 'llm'; known: none, rule")):
            rs.clock_tick(w)
        return
    pytest.fail("no state with an open auction")

