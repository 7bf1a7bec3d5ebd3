"""The Rust rules (``native/src/rules/{checks,offers,holdings,coalitions,dispatch}.rs``) against the
Python ones: every seat's move at every state of real episodes; named scenarios that reach every
refusal code and the settlements, breaches and formations; ladders of moves that fix one wrong
field at a time (the checks' order); and odd actions (fields of the wrong type, unknown ids,
others' blocks, duplicates, long lists, NaN and huge payments, long or blank messages, ...) on
states sampled from episodes. Both answers (the outcome or the refusal, word for word) and the
world after them must be equal bit for bit.
"""

from __future__ import annotations

import copy
import math
import os
import random
from collections import Counter
from types import ModuleType
from typing import Any

import pytest
from helpers_rs import canon, episode_worlds, py_apply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_arena.core.engine import Episode
from gpu_arena.core.rules import apply_action
from gpu_arena.core.types import ACTION_TYPES, CONDITION_KEYS, TASKS, Action, World
from gpu_arena.core.valuation import block_fits

# the pitches' own checks and codes are tested with rules/auctions.rs; here only that they dispatch
PITCHES = ("make_pitch", "counter_pitch")
# odd moves tried (more for a deeper search by hand)
EXAMPLES = int(os.environ.get("RS_RULES_EXAMPLES", "800"))


def answer(rs: ModuleType, world: World, lab_id: str, action: Action) -> tuple[Any, Any, str]:
    """The Rust and the Python answers to ``action``, canonical, and the code of Python's (``ok``
    where it applied)."""
    want = py_apply(world, lab_id, action)
    (ok, detail), _state = want
    return canon(rs.rules_apply(world, lab_id, action)), canon(want), "ok" if ok else detail[0]


@pytest.mark.parametrize("task", TASKS)
def test_every_move_of_real_episodes(rs: ModuleType, task: str) -> None:
    kinds: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for seed in range(3):
        for mix in range(3):
            for episode, moves in episode_worlds(task, seed, mix):
                for lab_id, action in moves.items():
                    if not isinstance(action, Action):
                        continue
                    got, want, code = answer(rs, episode.world, lab_id, action)
                    assert got == want, (task, seed, mix, episode.world.round_index, lab_id, action)
                    kinds[action.action_type] += 1
                    codes[code] += 1
    # the episodes trade and allocate
    assert {"wait", "send_offer", "allocate_to_job"} <= set(kinds), kinds
    assert codes["ok"] > 50, codes
    if task != "single_trade":
        assert {"accept_offer", "counter_offer"} & set(kinds), kinds


# ------------------------------------------------------------------------------------------ scenarios

def base() -> World:
    """A fresh coalition market at its first round: five labs, one of them with a pooled job."""
    return Episode.new("coalition_market", "train", 0, controlled=()).world


def do(world: World, lab_id: str, kind: str, **fields: Any) -> None:
    """A setup move, by the Python rules (it must apply)."""
    apply_action(world, lab_id, Action(kind, **fields))


def free_blocks(world: World, lab_id: str) -> list[str]:
    return [b.block_id for b in world.blocks.values()
            if b.owner == lab_id and b.status == "free" and b.start_round > world.round_index]


def fitting(world: World, lab_id: str, job_id: str) -> list[str]:
    job = world.jobs[job_id]
    return [bid for bid in free_blocks(world, lab_id) if block_fits(world.blocks[bid], job)]


def own_pair(world: World, fits: bool = True, late: bool = False) -> tuple[str, str, str]:
    """(lab, one of its free blocks, one of its open unpooled jobs) that fit, or (``fits`` false)
    that do not: too late (``late``) or too unreliable."""
    for lab_id in world.labs:
        for job in world.jobs.values():
            if job.owner != lab_id or job.pooled:
                continue
            for bid in free_blocks(world, lab_id):
                b = world.blocks[bid]
                too_late = b.end_round > job.deadline_round
                if fits == block_fits(b, job) and (fits or too_late == late):
                    return lab_id, bid, job.job_id
    raise AssertionError("the base world has no such pair")


class Pool:
    """The pooled job of the base world, its owner and two labs with blocks that fit it."""

    def __init__(self, world: World) -> None:
        job = next(j for j in world.jobs.values() if j.pooled)
        self.job, self.owner = job.job_id, job.owner
        self.members = [m for m in world.labs if m != self.owner and fitting(world, m, self.job)][:2]
        assert len(self.members) == 2
        self.blocks = [fitting(world, m, self.job)[0] for m in self.members]
        self.others = [m for m in world.labs if m != self.owner and m not in self.members]

    def propose(self, world: World, **fields: Any) -> Action:
        terms: dict[str, Any] = dict(job_id=self.job, member_lab_ids=self.members, requested_block_ids=self.blocks,
                                     shares={m: 1 / 3 for m in (self.owner, *self.members)}, payment=3.0)
        return Action("form_coalition", **{**terms, **fields})

    def proposed(self, world: World, **fields: Any) -> str:
        apply_action(world, self.owner, self.propose(world, **fields))
        return next(reversed(world.coalitions))

    def formed(self, world: World) -> str:
        cid = self.proposed(world)
        for m in self.members:
            do(world, m, "commit_to_coalition", coalition_id=cid)
        assert world.coalitions[cid].status == "formed"
        return cid


def offer_from(world: World, sender: str, target: str, **fields: Any) -> str:
    do(world, sender, "send_offer", target_lab_id=target, **fields)
    return next(reversed(world.offers))


Scenario = tuple[World, str, Action, str]


def scenarios() -> dict[str, Scenario]:
    """Named moves, each on a world set up by Python moves (or changed by hand), and the code the
    rules answer with (``ok``: applied)."""
    out: dict[str, Scenario] = {}
    w = base()
    labs = list(w.labs)
    a, b, c = labs[0], labs[1], labs[2]
    pool = Pool(w)
    p, m1, m2 = pool.owner, *pool.members

    def add(name: str, world: World, lab_id: str, action: Action, code: str) -> None:
        out[name] = (world, lab_id, action, code)

    def offer(lab_id: str = a, **fields: Any) -> Action:
        return Action("send_offer", **{"target_lab_id": b if lab_id != b else a, **fields})

    add("episode over", (w := base(), setattr(w, "done", True))[0], a, Action("wait"), "episode_done")
    for kind in ("bogus", 7, None, ("wait",)):
        add(f"action type {kind!r}", base(), a, Action(kind), "unknown_action_type")  # type: ignore[arg-type]
    w = base()
    w.labs[a].finished = True
    add("finished seat waits", w, a, Action("wait"), "ok")
    add("finished seat offers", copy.deepcopy(w), a, offer(payment=1), "seat_finished")
    # offers: the terms
    add("offer to self", base(), a, offer(target_lab_id=a, payment=1), "self_trade")
    add("offer to nobody", base(), a, offer(target_lab_id="lab_99", payment=1), "unknown_lab")
    add("offer without target", base(), a, Action("send_offer", payment=1), "missing_field")
    add("offer of nothing", base(), a, offer(), "empty_offer")
    add("offer pays and asks", base(), a, offer(payment=1, requested_payment=1), "invalid_payment")
    add("offer pays a bool", base(), a, offer(payment=True), "invalid_type")
    add("offer pays nan", base(), a, offer(payment=math.nan), "invalid_payment")
    add("offer pays too much", base(), a, offer(payment=1e7 + 1), "invalid_payment")
    add("offer asks too much", base(), a, offer(requested_payment=10**7 + 1), "invalid_payment")
    add("offer beyond budget", base(), a, offer(payment=w.labs[a].budget + 1), "insufficient_budget")
    add("offer at budget", base(), a, offer(payment=w.labs[a].budget + 1e-10), "ok")
    add("offer asks beyond budget", base(), a, offer(requested_payment=w.labs[b].budget * 2), "counterparty_cannot_pay")
    mine, theirs = free_blocks(w, a), free_blocks(w, b)
    add("offer gives and asks a block", base(), a, offer(block_ids=[mine[0]], requested_block_ids=[mine[0]]),
        "duplicate_ids")
    add("offer gives a block twice", base(), a, offer(block_ids=[mine[0], mine[0]]), "duplicate_ids")
    add("offer gives 17 blocks", base(), a, offer(block_ids=[f"b_{i}" for i in range(17)]), "list_too_long")
    add("offer gives a number", base(), a, offer(block_ids=[mine[0], 3]), "invalid_type")
    add("offer gives a string", base(), a, offer(block_ids=mine[0]), "invalid_type")
    # two things wrong at once: the check Python makes first answers
    add("offer gives 17 numbers", base(), a, offer(block_ids=[1] * 17), "list_too_long")
    add("offer gives a number twice", base(), a, offer(block_ids=[3, 3]), "invalid_type")
    add("offer gives a block twice and a number", base(), a, offer(block_ids=[mine[0], mine[0], 3]), "invalid_type")
    add("offer pays -inf", base(), a, offer(payment=-math.inf), "invalid_payment")
    add("offer pays -1e8", base(), a, offer(payment=-1e8), "invalid_payment")
    add("offer conditions: four unknown", base(), a, offer(payment=1, conditions=dict.fromkeys("wxyz", 1)),
        "conditions_too_large")
    add("offer conditions: unknown key, bad value", base(), a, offer(payment=1, conditions={"bogus": 1}),
        "unknown_condition")
    add("offer conditions: bad value, then unknown key", base(), a,
        offer(payment=1, conditions={"no_resale": 1, "bogus": True}), "invalid_type")
    add("offer to no one, by number", base(), a, offer(target_lab_id=0, payment=1), "invalid_type")
    w = base()
    w.blocks[mine[0]].status = "failed"
    w.blocks[mine[0]].owner = b
    add("offer gives their failed block", w, a, offer(block_ids=[mine[0]]), "block_not_owned")
    w = base()
    w.blocks[mine[0]].status = "failed"
    w.round_index = w.blocks[mine[0]].start_round
    add("offer gives a failed, started block", w, a, offer(block_ids=[mine[0]]), "block_failed")
    w = base()
    w.blocks[mine[0]].status = "reserved"
    w.round_index = w.blocks[mine[0]].start_round
    add("offer gives a reserved, started block", w, a, offer(block_ids=[mine[0]]), "block_started")
    w = base()
    w.blocks[mine[0]].status = "reserved"
    w.blocks[mine[0]].no_resale = True
    add("offer gives a reserved no-resale block", w, a, offer(block_ids=[mine[0]]), "block_reserved")
    w = base()
    w.blocks[mine[0]].no_resale = w.blocks[mine[0]].must_allocate = True
    add("offer gives a block under both conditions", w, a, offer(block_ids=[mine[0]]), "no_resale")
    add("offer gives mine, asks mine", base(), a, offer(block_ids=[mine[0]], requested_block_ids=[mine[1]]),
        "block_not_owned")
    add("offer beyond budget, asking beyond theirs", base(), a,
        offer(payment=w.labs[a].budget + 1, block_ids=["b_99"]), "unknown_block")
    add("offer gives their block", base(), a, offer(block_ids=[theirs[0]]), "block_not_owned")
    add("offer asks my block", base(), a, offer(requested_block_ids=[mine[0]]), "block_not_owned")
    add("offer gives no block", base(), a, offer(block_ids=["b_99"]), "unknown_block")
    add("offer swaps", base(), a, offer(block_ids=[mine[0]], requested_block_ids=theirs[:2], payment=2,
                                         conditions={"no_resale": True, "coalition_only": False},
                                         message="a fair swap", expires_in=5, job_id=next(iter(w.jobs))), "ok")
    add("offer for their job", base(), a, offer(payment=1, job_id=next(j for j in w.jobs if w.jobs[j].owner != a)),
        "unknown_job")
    for status, code in (("failed", "block_failed"), ("reserved", "block_reserved"), ("committed", "block_committed"),
                         ("allocated", "block_not_tradeable"), ("running", "block_not_tradeable")):
        w = base()
        w.blocks[mine[0]].status = status
        add(f"offer gives a {status} block", w, a, offer(block_ids=[mine[0]]), code)
    w = base()
    w.round_index = w.blocks[mine[0]].start_round
    add("offer gives a started block", w, a, offer(block_ids=[mine[0]]), "block_started")
    for flag in ("no_resale", "must_allocate"):
        w = base()
        setattr(w.blocks[theirs[0]], flag, True)
        add(f"offer asks a {flag} block", w, a, offer(requested_block_ids=[theirs[0]]), "no_resale")
    for conditions, code in (({"bogus": True}, "unknown_condition"), ({1: True}, "unknown_condition"),
                             ({"no_resale": 1}, "invalid_type"), ([], "invalid_type"),
                             ({"no_resale": True, "coalition_only": True, "must_allocate_to_job": True, "x": 1},
                              "conditions_too_large")):
        add(f"offer conditions {conditions!r}", base(), a, offer(payment=1, conditions=conditions), code)
    for expiry, code in ((0, "invalid_expiry"), (6, "invalid_expiry"), (True, "invalid_type"), (2.0, "invalid_type"),
                         (5, "ok")):
        add(f"offer expires in {expiry!r}", base(), a, offer(payment=1, expires_in=expiry), code)
    for text, code in (("é" * 500, "ok"), ("é" * 501, "message_too_long"), ("😀" * 501, "message_too_long"), (5, "invalid_type")):
        add(f"offer says {len(str(text))} chars", base(), a, offer(payment=1, message=text), code)
    w = base()
    for _ in range(6):
        offer_from(w, a, b, payment=1)
    add("seventh open offer", w, a, offer(payment=1), "too_many_offers")
    w = base()
    w.labs[b].finished = True
    add("offer to a finished lab", w, a, offer(payment=1), "lab_finished")
    # offers: the answers
    w = base()
    oid = offer_from(w, a, b, block_ids=[mine[0]], requested_block_ids=[theirs[0]], payment=1,
                     conditions={"no_resale": True})
    add("accept a swap", copy.deepcopy(w), b, Action("accept_offer", offer_id=oid), "ok")
    add("accept own offer", copy.deepcopy(w), a, Action("accept_offer", offer_id=oid), "offer_not_addressed")
    add("reject another's offer", copy.deepcopy(w), c, Action("reject_offer", offer_id=oid), "offer_not_addressed")
    add("reject an offer", copy.deepcopy(w), b, Action("reject_offer", offer_id=oid), "ok")
    add("withdraw an offer", copy.deepcopy(w), a, Action("reject_offer", offer_id=oid), "ok")
    add("accept no offer", copy.deepcopy(w), b, Action("accept_offer", offer_id="o_99"), "unknown_offer")
    add("accept offer 3", copy.deepcopy(w), b, Action("accept_offer", offer_id=3), "invalid_type")
    add("accept nothing", copy.deepcopy(w), b, Action("accept_offer"), "missing_field")
    add("counter a swap", copy.deepcopy(w), b, Action("counter_offer", offer_id=oid, requested_payment=2), "ok")
    add("counter own offer", copy.deepcopy(w), a, Action("counter_offer", offer_id=oid, payment=2),
        "offer_not_addressed")
    w2 = copy.deepcopy(w)
    w2.round_index = w2.offers[oid].expires_round
    add("accept an expired offer", w2, b, Action("accept_offer", offer_id=oid), "offer_not_open")
    w2 = copy.deepcopy(w)
    do(w2, b, "reject_offer", offer_id=oid)
    add("accept a rejected offer", w2, b, Action("accept_offer", offer_id=oid), "offer_not_open")
    w2 = copy.deepcopy(w)
    w2.blocks[mine[0]].status = "reserved"
    add("accept a stale offer", w2, b, Action("accept_offer", offer_id=oid), "offer_stale")
    w2 = copy.deepcopy(w)
    w2.labs[a].budget = 0.5
    add("accept an offer its sender cannot pay", w2, b, Action("accept_offer", offer_id=oid), "offer_stale")
    w2 = copy.deepcopy(w)
    w2.labs[a].finished = True
    add("accept a finished lab's offer", w2, b, Action("accept_offer", offer_id=oid), "offer_not_open")
    w2 = copy.deepcopy(w)
    w2.blocks[theirs[0]].no_resale = True
    add("accept giving a no-resale block", w2, b, Action("accept_offer", offer_id=oid), "no_resale")
    w = base()
    oid = offer_from(w, a, b, requested_payment=w.labs[b].budget)
    w.labs[b].budget -= 1
    add("accept an offer beyond budget", w, b, Action("accept_offer", offer_id=oid), "insufficient_budget")
    w = base()
    oid = offer_from(w, a, b, payment=1, conditions={"coalition_only": True})
    add("accept coalition-only outside", copy.deepcopy(w), b, Action("accept_offer", offer_id=oid), "condition_unmet")
    add("accept coalition-only outside for their job", copy.deepcopy(w), b,
        Action("accept_offer", offer_id=oid, job_id="j_99"), "condition_unmet")
    w.round_index = w.offers[oid].expires_round
    add("accept another's expired offer", copy.deepcopy(w), c, Action("accept_offer", offer_id=oid),
        "offer_not_addressed")
    w = base()
    oid = offer_from(w, a, b, block_ids=[mine[0]], requested_block_ids=[theirs[0]], payment=1)
    w.labs[a].finished = True
    w.blocks[mine[0]].status = "failed"
    add("accept a finished lab's stale offer", copy.deepcopy(w), b, Action("accept_offer", offer_id=oid),
        "offer_not_open")
    w.labs[a].finished = False
    w.labs[a].budget = 0.0
    add("accept a stale offer its sender cannot pay", copy.deepcopy(w), b, Action("accept_offer", offer_id=oid),
        "offer_stale")
    w.blocks[mine[0]].status = "free"
    w.blocks[theirs[0]].status = "allocated"
    add("accept giving an allocated block to a sender who cannot pay", w, b, Action("accept_offer", offer_id=oid),
        "block_not_tradeable")
    # an accepted block allocated to the accepting lab's job, and the sender's too
    lab_id, bid, jid = own_pair(w)
    buyer = next(x for x in labs if x != lab_id)
    w = base()
    w.jobs[jid].owner = buyer  # the job passes to the buyer, which the block then fits
    oid = offer_from(w, lab_id, buyer, block_ids=[bid], requested_payment=0.5,
                     conditions={"must_allocate_to_job": True})
    add("accept into a job", w, buyer, Action("accept_offer", offer_id=oid, job_id=jid), "ok")
    # holdings
    lab_id, bid, jid = own_pair(w)
    add("reserve", base(), lab_id, Action("reserve_capacity", block_ids=[bid], job_id=jid), "ok")
    add("reserve nothing", base(), lab_id, Action("reserve_capacity", job_id=jid), "empty_list")
    add("reserve without job", base(), lab_id, Action("reserve_capacity", block_ids=[bid]), "missing_field")
    w = base()
    w.jobs[jid].min_reliability = 1.0
    w.jobs[jid].deadline_round = w.blocks[bid].end_round - 1
    add("reserve too late and unreliable", w, lab_id, Action("reserve_capacity", block_ids=[bid], job_id=jid),
        "block_too_late")
    w = base()
    w.jobs[jid].status = "failed"
    add("reserve nothing for a settled job", w, lab_id, Action("reserve_capacity", block_ids=[], job_id=jid),
        "empty_list")
    late = own_pair(base(), fits=False, late=True)
    add("reserve too late", base(), late[0], Action("reserve_capacity", block_ids=[late[1]], job_id=late[2]),
        "block_too_late")
    shaky = own_pair(base(), fits=False)
    add("reserve unreliable", base(), shaky[0], Action("reserve_capacity", block_ids=[shaky[1]], job_id=shaky[2]),
        "block_unreliable")
    w = base()
    w.jobs[jid].status = "completed"
    add("reserve for a settled job", w, lab_id, Action("reserve_capacity", block_ids=[bid], job_id=jid), "job_closed")
    w = base()
    do(w, lab_id, "reserve_capacity", block_ids=[bid], job_id=jid)
    add("release a reserved block", copy.deepcopy(w), lab_id, Action("release_capacity", block_ids=[bid]), "ok")
    add("release a free block", base(), lab_id, Action("release_capacity", block_ids=[bid]), "block_not_releasable")
    add("release their block", base(), b, Action("release_capacity", block_ids=[mine[0]]), "block_not_owned")
    add("allocate a reserved block", copy.deepcopy(w), lab_id, Action("allocate_to_job", block_ids=[bid], job_id=jid),
        "ok")
    other_job = next((j.job_id for j in w.jobs.values() if j.owner == lab_id and j.job_id != jid), None)
    if other_job:
        add("allocate a block reserved for another job", copy.deepcopy(w), lab_id,
            Action("allocate_to_job", block_ids=[bid], job_id=other_job), "block_reserved")
    do(w, lab_id, "allocate_to_job", block_ids=[bid], job_id=jid)
    add("allocate an allocated block", copy.deepcopy(w), lab_id,
        Action("allocate_to_job", block_ids=[bid], job_id=jid), "block_used")
    add("release an allocated block", copy.deepcopy(w), lab_id, Action("release_capacity", block_ids=[bid]), "ok")
    add("allocate an allocated block of theirs", copy.deepcopy(w), next(x for x in labs if x != lab_id),
        Action("allocate_to_job", block_ids=[bid], job_id=next(j.job_id for j in w.jobs.values() if j.owner != lab_id)),
        "block_used")
    w.round_index = w.blocks[bid].start_round
    add("release a started block", copy.deepcopy(w), lab_id, Action("release_capacity", block_ids=[bid]),
        "block_started")
    add("release their started block", w, next(x for x in labs if x != lab_id),
        Action("release_capacity", block_ids=[bid]), "block_not_owned")
    w = base()
    w.labs[lab_id].budget = 0.0
    add("allocate beyond budget", w, lab_id, Action("allocate_to_job", block_ids=[bid], job_id=jid),
        "insufficient_budget")
    for who in labs:
        add(f"allocate by plan ({who})", base(), who, Action("allocate_to_job"), "ok")
        add(f"allocate some by plan ({who})", base(), who,
            Action("allocate_to_job", block_ids=free_blocks(base(), who)[:2]), "ok")
        add(f"finish ({who})", base(), who, Action("finish"), "ok")
    add("allocate their block by plan", base(), a, Action("allocate_to_job", block_ids=[theirs[0]]), "block_not_owned")
    add("allocate by plan, blocks 0", base(), a, Action("allocate_to_job", block_ids=0), "ok")
    # messages
    for text, code in (("hello", "ok"), ("", "empty_message"), (None, "empty_message"), (" \t", "empty_message"),
                       ("\x1c\x1f\u2003\x85", "empty_message"), ("\u200b", "ok"), ("x" * 501, "message_too_long"),
                       (["hi"], "invalid_type")):
        add(f"message {text!r}", base(), a, Action("send_message", message=text), code)
    add("message to self", base(), a, Action("send_message", target_lab_id=a, message="hi"), "self_trade")
    add("message to one", base(), a, Action("send_message", target_lab_id=b, message="hi"), "ok")
    # coalitions
    add("propose", base(), p, pool.propose(base(), message="join us", expires_in=6), "ok")
    add("propose on an unpooled job", base(), p,
        pool.propose(base(), job_id=next(j for j in w.jobs if w.jobs[j].owner == p and not w.jobs[j].pooled)),
        "job_not_poolable")
    add("propose to self", base(), p, pool.propose(base(), member_lab_ids=[p, m1]), "self_trade")
    add("propose to nobody", base(), p, pool.propose(base(), member_lab_ids=[]), "empty_list")
    add("propose asking nothing", base(), p, pool.propose(base(), requested_block_ids=[]), "empty_list")
    add("propose asking a member nothing", base(), p, pool.propose(base(), requested_block_ids=pool.blocks[:1]),
        "member_without_blocks")
    add("propose asking an outsider's block", base(), p,
        pool.propose(base(), requested_block_ids=[*pool.blocks, free_blocks(w, pool.others[0])[0]]), "block_not_owned")
    add("propose listing a block twice", base(), p,
        pool.propose(base(), block_ids=pool.blocks[:1]), "duplicate_ids")
    w = base()
    w.labs[m2].finished = True
    add("propose to a finished lab", w, p, pool.propose(w), "lab_finished")
    even = {x: 1 / 3 for x in (p, m1, m2)}
    for shares, code in ((None, "invalid_shares"), ([1], "invalid_shares"), ({p: 1.0}, "invalid_shares"),
                         ({**even, "x": 0.0}, "invalid_shares"), ({**even, p: True}, "invalid_shares"),
                         ({**even, p: math.inf}, "invalid_shares"), ({**even, p: -0.0}, "invalid_shares"),
                         ({p: 1, m1: 0, m2: 0}, "ok"), ({p: 0.5, m1: 0.25, m2: 0.25 + 1e-7}, "ok"),
                         ({p: 0.5, m1: 0.25, m2: 0.25 + 1e-5}, "invalid_shares"), ({m2: 0.2, m1: 0.3, p: 0.5}, "ok")):
        add(f"propose shares {shares!r}", base(), p, pool.propose(base(), shares=shares), code)
    add("propose paying too much", base(), p, pool.propose(base(), payment=w.labs[p].budget + 1), "insufficient_budget")
    add("propose for 7 rounds", base(), p, pool.propose(base(), expires_in=7), "invalid_expiry")
    add("propose at length", base(), p, pool.propose(base(), message="x" * 501), "message_too_long")
    add("propose on an unpooled job to self", base(), p,
        pool.propose(base(), job_id=next(j for j in w.jobs if w.jobs[j].owner == p and not w.jobs[j].pooled),
                     member_lab_ids=[p]), "job_not_poolable")
    add("propose shares uncovering and nan", base(), p, pool.propose(base(), shares={p: math.nan}), "invalid_shares")
    add("propose shares nan and summing to 2", base(), p,
        pool.propose(base(), shares={p: math.nan, m1: 1.0, m2: 1.0}), "invalid_shares")
    add("propose shares of a huge int", base(), p, pool.propose(base(), shares={p: 2**62, m1: 0, m2: 0}),
        "invalid_shares")
    add("propose shares as ints", base(), p, pool.propose(base(), shares={p: 0, m1: 1, m2: 0}), "ok")
    add("propose, bad shares, bad payment", base(), p, pool.propose(base(), shares=[], payment=-1), "invalid_shares")
    add("propose, bad payment, bad expiry", base(), p, pool.propose(base(), payment=-1, expires_in=0),
        "invalid_payment")
    add("propose, bad expiry, long message", base(), p, pool.propose(base(), expires_in=0, message="x" * 501),
        "invalid_expiry")
    w = base()
    for _ in range(3):
        pool.proposed(w)
    add("fourth proposal, long message", copy.deepcopy(w), p, pool.propose(w, message="x" * 501), "message_too_long")
    add("fourth proposal", w, p, pool.propose(w), "too_many_proposals")
    w = base()
    cid = pool.proposed(w)
    add("commit", copy.deepcopy(w), m1, Action("commit_to_coalition", coalition_id=cid), "ok")
    add("commit as proposer", copy.deepcopy(w), p, Action("commit_to_coalition", coalition_id=cid), "already_committed")
    add("commit as outsider", copy.deepcopy(w), pool.others[0], Action("commit_to_coalition", coalition_id=cid),
        "not_a_member")
    add("commit to nothing", copy.deepcopy(w), m1, Action("commit_to_coalition"), "missing_field")
    add("commit to no coalition", copy.deepcopy(w), m1, Action("commit_to_coalition", coalition_id="c_99"),
        "unknown_coalition")
    w2 = copy.deepcopy(w)
    w2.labs[m1].budget = 0.0
    add("commit beyond budget", w2, m1, Action("commit_to_coalition", coalition_id=cid), "insufficient_budget")
    w2 = copy.deepcopy(w)
    w2.round_index = w2.coalitions[cid].expires_round
    add("commit too late", w2, m1, Action("commit_to_coalition", coalition_id=cid), "coalition_not_open")
    w2 = copy.deepcopy(w)
    do(w2, p, "finish")
    add("commit to a lapsed proposal", w2, m1, Action("commit_to_coalition", coalition_id=cid), "coalition_not_open")
    w2 = copy.deepcopy(w)
    w2.round_index = w2.coalitions[cid].expires_round
    add("commit too late as outsider", copy.deepcopy(w2), pool.others[0], Action("commit_to_coalition", coalition_id=cid),
        "not_a_member")
    add("commit too late as proposer", w2, p, Action("commit_to_coalition", coalition_id=cid), "coalition_not_open")
    w2 = copy.deepcopy(w)
    w2.blocks[pool.blocks[0]].status = "failed"
    w2.labs[m1].budget = 0.0
    add("commit a failed block beyond budget", w2, m1, Action("commit_to_coalition", coalition_id=cid), "block_failed")
    do(w, m1, "commit_to_coalition", coalition_id=cid)
    add("commit last: formed", copy.deepcopy(w), m2, Action("commit_to_coalition", coalition_id=cid), "ok")
    for change in ("failed", "budget", "payment", "settled"):
        w2 = copy.deepcopy(w)
        if change == "failed":
            w2.blocks[pool.blocks[0]].status = "failed"
        elif change == "budget":
            w2.labs[m1].budget = 0.0
        elif change == "payment":
            w2.labs[p].budget = 1.0
        else:
            w2.jobs[pool.job].status = "partial"
        add(f"commit last: cannot form ({change})", w2, m2, Action("commit_to_coalition", coalition_id=cid), "ok")
    w = base()
    oid = offer_from(w, m1, a if a != m1 else c, block_ids=pool.blocks[:1])
    cid = pool.formed(w)
    assert w.offers[oid].status == "superseded"
    add("propose on a pooled job again", copy.deepcopy(w), p, pool.propose(w), "coalition_exists")
    add("release a committed block: breach", copy.deepcopy(w), m1,
        Action("release_capacity", block_ids=pool.blocks[:1]), "ok")
    add("offer a committed block", copy.deepcopy(w), m1, offer(m1, block_ids=pool.blocks[:1]), "block_committed")
    add("finish in a coalition", copy.deepcopy(w), m1, Action("finish"), "ok")
    oid = offer_from(w, m1, m2, payment=1, conditions={"coalition_only": True})
    add("accept coalition-only inside", w, m2, Action("accept_offer", offer_id=oid), "ok")
    return out


def ladders() -> dict[str, tuple[World, str, list[Action]]]:
    """For some action types, moves whose fields are all wrong, then right one more at a time in the
    order Python checks them: each step is refused by the next check, the last applies. Rust must
    check in the same order to give the same answers."""
    w = base()
    labs = list(w.labs)
    a, b = labs[0], labs[1]
    mine, theirs = free_blocks(w, a), free_blocks(w, b)
    my_job = next(j.job_id for j in w.jobs.values() if j.owner == a)
    offer_terms = [("block_ids", "x", [mine[0]]), ("requested_block_ids", [1], [theirs[0]]),
                   ("payment", math.nan, 1.0), ("requested_payment", -1, 0), ("job_id", 7, my_job),
                   ("conditions", {"bogus": True}, {"no_resale": True}), ("message", "x" * 501, "hi"),
                   ("expires_in", 0, 3)]
    lab_id, bid, jid = own_pair(w)
    pool = Pool(w)
    countered = base()
    oid = offer_from(countered, b, a, payment=1)
    steps = {
        "send_offer": (base(), a, [("target_lab_id", 5, b), *offer_terms]),
        "counter_offer": (countered, a, [("offer_id", 3, oid), *offer_terms]),
        "form_coalition": (base(), pool.owner, [
            ("job_id", 5, pool.job), ("member_lab_ids", "x", pool.members), ("block_ids", [1], []),
            ("requested_block_ids", "x", pool.blocks), ("shares", [1], {m: 1 / 3 for m in (pool.owner, *pool.members)}),
            ("payment", math.inf, 3.0), ("expires_in", 9, 4), ("message", "x" * 501, "hi")]),
        "reserve_capacity": (base(), lab_id, [("block_ids", "x", [bid]), ("job_id", 5, jid)]),
        "allocate_to_job": (base(), lab_id, [("job_id", 5, jid), ("block_ids", "x", [bid])]),
        "send_message": (base(), a, [("target_lab_id", 5, b), ("message", "x" * 501, "hi")]),
    }
    out = {}
    for kind, (world, lab_id, fields) in steps.items():
        moves = [Action(kind, **{name: (good if i < n else bad) for i, (name, bad, good) in enumerate(fields)})
                 for n in range(len(fields) + 1)]
        out[kind] = (world, lab_id, moves)
    return out


SCENARIOS = scenarios()
LADDERS = ladders()


@pytest.mark.parametrize("kind", list(LADDERS))
def test_checks_run_in_pythons_order(rs: ModuleType, kind: str) -> None:
    world, lab_id, moves = LADDERS[kind]
    codes = []
    for action in moves:
        got, want, code = answer(rs, world, lab_id, action)
        assert got == want, action
        codes.append(code)
    # every step but the last is refused, each by a check of its own
    assert codes[-1] == "ok" and "ok" not in codes[:-1], codes


# every code the rules here answer with (``invalid_text``, a lone surrogate, cannot reach Rust: see
# test_fields_python_reads_but_rust_cannot)
RULE_CODES = {
    "already_committed", "block_committed", "block_failed", "block_not_owned", "block_not_releasable",
    "block_not_tradeable", "block_reserved", "block_started", "block_too_late", "block_unreliable", "block_used",
    "coalition_exists", "coalition_not_open", "condition_unmet", "conditions_too_large", "counterparty_cannot_pay",
    "duplicate_ids", "empty_list", "empty_message", "empty_offer", "episode_done", "insufficient_budget",
    "invalid_expiry", "invalid_payment", "invalid_shares", "invalid_type", "job_closed", "job_not_poolable",
    "lab_finished", "list_too_long", "member_without_blocks", "message_too_long", "missing_field", "no_resale",
    "not_a_member", "offer_not_addressed", "offer_not_open", "offer_stale", "seat_finished", "self_trade",
    "too_many_offers", "too_many_proposals", "unknown_action_type", "unknown_block", "unknown_coalition",
    "unknown_condition", "unknown_job", "unknown_lab", "unknown_offer",
}


def test_scenarios_reach_every_code() -> None:
    codes = {code for _world, _lab, _action, code in SCENARIOS.values()}
    assert codes == RULE_CODES | {"ok"}
    kinds = {action.action_type for _world, _lab, action, _code in SCENARIOS.values()}
    assert set(ACTION_TYPES) - set(PITCHES) <= kinds


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(rs: ModuleType, name: str) -> None:
    world, lab_id, action, code = SCENARIOS[name]
    got, want, got_code = answer(rs, world, lab_id, action)
    assert got_code == code, (name, want)
    assert got == want


def test_the_short_allocation_keeps_promises_alike(rs: ModuleType) -> None:
    """``allocate_to_job()`` on turns whose best plan runs a block the seat promised to a coalition
    still gathering consents (decision 0046): the plan's other blocks allocated, the promised ones
    kept, word for word and bit for bit. Played episodes seldom reach it, so the turns are found
    by the teacher on the Python core."""
    from helpers import first_promise

    kept = 0
    for seed in (2, 4, 8):
        found = first_promise(seed)
        assert found is not None, seed
        episode = found[0].episode
        assert isinstance(episode, Episode), seed
        got, want, code = answer(rs, episode.world, "lab_0", Action("allocate_to_job"))
        assert got == want and code == "ok", seed
        kept += "; kept " in str(want)
    assert kept == 3


# ------------------------------------------------------------------------------------------ odd moves

# seeds of episodes whose states the odd moves are tried on (those of the markets hold an auction)
SAMPLE_SEEDS = {"single_trade": 10, "market_round": 26, "coalition_market": 3}


def sampled_states() -> list[World]:
    """States of episodes of every task and seat mix, every round but the last (the episode over:
    :func:`surgery` ends episodes)."""
    states: list[World] = []
    for task in TASKS:
        for mix in range(3):
            for episode, _moves in episode_worlds(task, SAMPLE_SEEDS[task], mix):
                if not episode.done:
                    states.append(copy.deepcopy(episode.world))
    return states


STATES: list[World] = []


def states() -> list[World]:
    if not STATES:
        STATES.extend(sampled_states())
    return STATES


# values of every kind a field may hold, none of them what any field wants
JUNK: list[Any] = [
    None, True, False, 0, 1, -1, 7, 2**63 - 1, -(2**63), 0.5, -0.0, math.nan, math.inf, -math.inf, "", "x", "é",
    (), [], {}, [None], ("a", 1), {"a": 1}, [1.5], {1: 2},
]
ODD_AMOUNTS: list[Any] = [
    -1, -0.0, 0.0, 1e7, 1e7 + 2.0, 10**7, 10**7 + 1, 2**62, 2**63 - 1, math.nan, math.inf, -math.inf, True,
    False, "5", [1], 1e-300, 5e-324, -5e-324, 1e308, -1e308,
]
ODD_MESSAGES: list[Any] = [
    "", " ", " \t\n", "\x1c\x1d\x1e\x1f", "\u2003\u3000\x85\xa0", "\u200b", "x" * 500, "x" * 501, "é" * 500,
    "é" * 501, "😀" * 500, "😀" * 501, "a\x00b", "'\"\\", "\x7f\u0378\U000e0001",
]
ODD_TYPES: list[Any] = ["bogus", "WAIT", "", "wait ", 3, None, ("wait",), ["finish"], True]
# characters of the random texts: ASCII, Latin, astral, Python-only whitespace, controls, quotes
ALPHABET = "ab z\t\n\x1c\u2003\x85é😀'\"\\\x00\u0378"

# the fields each action type reads (the others are ignored, so they are seldom set)
FIELDS: dict[str, tuple[str, ...]] = {
    "send_offer": ("target_lab_id", "block_ids", "requested_block_ids", "payment", "requested_payment", "job_id",
                   "conditions", "message", "expires_in"),
    "counter_offer": ("offer_id", "block_ids", "requested_block_ids", "payment", "requested_payment", "job_id",
                      "conditions", "message", "expires_in"),
    "accept_offer": ("offer_id", "job_id"),
    "reject_offer": ("offer_id",),
    "make_pitch": ("payment", "job_id", "message"),
    "counter_pitch": ("target_lab_id", "payment", "job_id", "message"),
    "reserve_capacity": ("block_ids", "job_id"),
    "release_capacity": ("block_ids",),
    "form_coalition": ("job_id", "member_lab_ids", "block_ids", "requested_block_ids", "payment", "expires_in",
                       "message", "shares"),
    "commit_to_coalition": ("coalition_id",),
    "allocate_to_job": ("job_id", "block_ids"),
    "send_message": ("target_lab_id", "message"),
    "wait": (),
    "finish": (),
}
ALL_FIELDS = sorted({f for names in FIELDS.values() for f in names})


class OddMoves:
    """Odd actions for one seat of one state: fields drawn from ids of the world (the seat's own and
    others', live and settled), ids of nothing, and values of every wrong type. Each action draws
    how odd its fields are, so that some pass the early checks and reach the later ones."""

    def __init__(self, world: World, lab_id: str) -> None:
        self.lab_id = lab_id
        self.labs = list(world.labs)
        self.others = [x for x in self.labs if x != lab_id]
        # plausible blocks: free and not started (reserved ones too, for the seat's own)
        self.blocks_of: dict[Any, list[str]] = {}
        for b in world.blocks.values():
            if b.start_round > world.round_index and b.status in ("free", "reserved"):
                self.blocks_of.setdefault(b.owner, []).append(b.block_id)
        self.mine = self.blocks_of.get(lab_id, [])
        self.all_mine = [b.block_id for b in world.blocks.values() if b.owner == lab_id]
        self.theirs = [b.block_id for b in world.blocks.values() if b.owner != lab_id]
        self.my_jobs = [j.job_id for j in world.jobs.values() if j.owner == lab_id and j.status == "open"]
        self.my_pooled = [j for j in self.my_jobs if world.jobs[j].pooled]
        self.my_closed = [j.job_id for j in world.jobs.values() if j.owner == lab_id and j.status != "open"]
        self.other_jobs = [j.job_id for j in world.jobs.values() if j.owner != lab_id]
        live = [o for o in world.offers.values() if o.status == "open" and world.round_index < o.expires_round]
        self.to_me = [o.offer_id for o in live if o.target == lab_id]
        self.my_live = [o.offer_id for o in live if lab_id in (o.target, o.sender)]
        self.releasable = [b.block_id for b in world.blocks.values() if b.owner == lab_id
                           and b.start_round > world.round_index and b.status in ("reserved", "allocated", "committed")]
        self.my_offers = [o.offer_id for o in world.offers.values() if lab_id in (o.target, o.sender)]
        self.offer_senders = {o.offer_id: o.sender for o in world.offers.values()}
        self.offers = list(world.offers)
        self.my_coalitions = [c.coalition_id for c in world.coalitions.values() if lab_id in c.members]
        self.coalitions = list(world.coalitions)
        self.any_id = [*self.labs, *world.blocks, *world.jobs, *self.offers, *self.coalitions,
                       "", "nope", "b_999", "é"]
        self.budget = world.labs[lab_id].budget
        self.auction = any(a.status == "open" and world.round_index < a.close_round for a in world.auctions.values())
        self.pitched = [p for a in world.auctions.values() for p in a.pitches if p != lab_id]
        # drawn for each action: the chance that a field is odd, or the one field that is
        self.odd = 0.0
        self.odd_fields: set[str] = set()
        self.current = ""
        self.paying = False

    def plausible(self, rng: random.Random) -> bool:
        """Whether the field being drawn takes a plausible value."""
        return self.current not in self.odd_fields and rng.random() >= self.odd

    def pick(self, rng: random.Random, good: list[Any], *odd: list[Any]) -> Any:
        """One of ``good``, or (at the action's oddness, or when there is none) of the odd pools."""
        pools = [p for p in odd if p]
        if good and (not pools or self.plausible(rng)):
            return rng.choice(good)
        return rng.choice(rng.choice(pools)) if pools else "nothing"

    def text(self, rng: random.Random) -> Any:
        if self.plausible(rng):
            return rng.choice([None, "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(12)))])
        return rng.choice(ODD_MESSAGES) if rng.random() < 0.8 else rng.choice(JUNK)

    def amount(self, rng: random.Random) -> Any:
        if self.plausible(rng):
            r = rng.random()
            if r < 0.4:
                return rng.choice([0, 0.0, None])
            if self.current == "requested_payment" and self.paying:
                return rng.choice([0, 0.0, None])
            top = max(0.0, min(self.budget, 300.0))
            return round(rng.uniform(0, top), rng.choice([0, 2, 9])) if r < 0.8 else rng.randrange(int(top) + 1)
        r = rng.random()
        if r < 0.3:
            return rng.choice([self.budget, self.budget + 1e-10, self.budget + 1e-8, self.budget * 2 + 1])
        return rng.choice(ODD_AMOUNTS) if r < 0.8 else rng.choice(JUNK)

    def ids(self, rng: random.Random, good: list[str], other: list[str], least: int = 0) -> Any:
        """An id list: plausible (a list or a tuple), or with a duplicate, too long, ill-typed."""
        if self.plausible(rng):
            picked = rng.sample(good, min(len(good), rng.randrange(least, 4)))
            return tuple(picked) if rng.random() < 0.5 else picked
        pool = list(dict.fromkeys([*good, *other])) or ["nothing"]
        picked = rng.sample(pool, min(len(pool), rng.randrange(4)))
        r = rng.random()
        if r < 0.2:
            return [*picked, rng.choice(pool)] if picked else [rng.choice(pool)] * 2
        if r < 0.35:
            return [rng.choice(self.any_id) for _ in range(rng.choice([16, 17, 18]))]
        if r < 0.45:
            return [*picked, rng.choice(JUNK)]
        if r < 0.5:  # ill-typed and duplicated
            junk = rng.choice(JUNK)
            return [*picked, junk, junk]
        if r < 0.7:
            return [rng.choice(self.any_id) for _ in range(rng.randrange(4))]
        return rng.choice(pool) if r < 0.8 else rng.choice(JUNK)

    def conditions(self, rng: random.Random) -> Any:
        keys = list(CONDITION_KEYS)
        if self.plausible(rng):
            return rng.choice([None, {k: rng.random() < 0.7 for k in rng.sample(keys, rng.randrange(4))}])
        r = rng.random()
        if r < 0.25:
            return {**dict.fromkeys(keys, True), "extra": True}
        if r < 0.8:
            odd = rng.choice(["bogus", "", 1, None, 2.5, ("no_resale",)])
            return {rng.choice([*keys, odd]): rng.choice([True, False, 1, 0, None, "yes"]) for _ in range(2)}
        return rng.choice(JUNK)

    def shares(self, rng: random.Random, members: Any) -> Any:
        names = [m for m in members if isinstance(m, str)] if isinstance(members, list | tuple) else []
        everyone = list(dict.fromkeys([self.lab_id, *names]))
        n = len(everyone)
        even = {m: 1 / n for m in everyone}
        first = {m: (1 if i == 0 else 0) for i, m in enumerate(everyone)}
        if self.plausible(rng):
            return rng.choice([even, first, dict(reversed(list(even.items())))])
        return rng.choice([
            {**even, everyone[0]: 1 / n + 1e-7}, {**even, everyone[0]: 1 / n + 1e-5}, {**first, everyone[0]: True},
            {**first, everyone[0]: math.nan}, {**first, everyone[0]: 2**62}, {**even, everyone[-1]: -0.0},
            {**first, everyone[-1]: -1}, {**first, everyone[-1]: "0"}, {**even, "x": 0}, {**even, 1: 0.0},
            {m: 0.1 for m in everyone}, {rng.choice(self.labs): 1.0}, rng.choice(JUNK),
        ])

    def field(self, rng: random.Random, name: str, fields: dict[str, Any]) -> Any:
        self.current = name
        payment = fields.get("payment")
        self.paying = isinstance(payment, int | float) and payment > 0
        if name == "target_lab_id":
            good = self.pitched if fields["action_type"] == "counter_pitch" else self.others
            return self.pick(rng, good or self.others, self.labs, self.any_id, JUNK)
        if name == "offer_id":
            good = self.my_live if fields["action_type"] == "reject_offer" else self.to_me
            return self.pick(rng, good, self.my_offers, self.offers, ["o_999"], JUNK)
        if name == "coalition_id":
            return self.pick(rng, self.my_coalitions, self.coalitions, ["c_999"], JUNK)
        if name == "job_id":
            good = self.my_pooled if fields["action_type"] == "form_coalition" else self.my_jobs
            return self.pick(rng, good or self.my_jobs, self.my_jobs, self.my_closed, self.other_jobs, ["j_999"], JUNK)
        if name == "block_ids":
            kind = fields["action_type"]
            good = self.releasable if kind == "release_capacity" else self.mine
            least = 1 if kind in ("release_capacity", "reserve_capacity") else 0
            return self.ids(rng, good, [*self.all_mine, *self.theirs], least)
        if name == "requested_block_ids":
            # the blocks of whom the action names: its target, the offer's sender, the members
            offer_id = fields.get("offer_id")
            sender = self.offer_senders.get(offer_id) if isinstance(offer_id, str) else None
            names = fields.get("member_lab_ids") or [fields.get("target_lab_id"), sender]
            names = names if isinstance(names, list | tuple) else []
            theirs = [b for m in names if isinstance(m, str) and m != self.lab_id for b in self.blocks_of.get(m, [])]
            return self.ids(rng, theirs or self.theirs, self.mine, least=1 if "member_lab_ids" in fields else 0)
        if name == "member_lab_ids":
            return self.ids(rng, self.others, [self.lab_id, "nope"], least=1)
        if name in ("payment", "requested_payment"):
            return self.amount(rng)
        if name == "message":
            return self.text(rng)
        if name == "conditions":
            return self.conditions(rng)
        if name == "shares":
            return self.shares(rng, fields.get("member_lab_ids", ()))
        assert name == "expires_in"
        if self.plausible(rng):
            return rng.choice([None, 1, 2, 3, 5, 6])
        return rng.choice([0, -1, 7, 8, 2.0, "3", True, 2**40, -(2**63), None])

    def ready(self, kind: Any) -> bool:
        """Whether this seat has what a plausible ``kind`` names (an offer to answer, a pooled job...)."""
        need = {
            "send_offer": self.blocks_of, "counter_offer": self.to_me, "accept_offer": self.to_me,
            "reject_offer": self.my_live, "reserve_capacity": self.mine and self.my_jobs,
            "release_capacity": self.releasable, "form_coalition": self.my_pooled,
            "commit_to_coalition": self.my_coalitions, "allocate_to_job": self.mine and self.my_jobs,
            "make_pitch": self.auction, "counter_pitch": self.auction and self.pitched,
        }
        return bool(need.get(kind, True)) if isinstance(kind, str) else True

    def action(self, rng: random.Random, kind: Any) -> Action:
        wanted = FIELDS.get(kind, ()) if isinstance(kind, str) else ()
        r = rng.random()
        if wanted and r < 0.6:  # plausible but for one or two fields, the later (checked last) the likelier
            weights = range(1, len(wanted) + 1)
            self.odd, self.odd_fields = 0.0, set(rng.choices(wanted, weights, k=2 if r < 0.25 else 1))
        else:
            self.odd, self.odd_fields = rng.choice([0.0, 0.03, 0.1, 0.3, 0.6]), set()
        fields: dict[str, Any] = {"action_type": kind}
        if kind in ("send_offer", "counter_offer") and rng.random() < 0.1:
            wanted = wanted[:1]  # the target or the offer alone: an offer of nothing
        for name in wanted:
            if name in self.odd_fields or rng.random() < 0.85:
                fields[name] = self.field(rng, name, fields)
        if rng.random() < 0.1:  # a field the type does not read
            name = rng.choice(ALL_FIELDS)
            fields.setdefault(name, self.field(rng, name, fields))
        return Action(**fields)


def surgery(rng: random.Random, world: World, lab_id: str) -> World:
    """The state as it is, mostly, or a copy changed where episodes seldom go: blocks bought under
    a condition, the seat finished, the episode over."""
    r = rng.random()
    if r < 0.8:
        return world
    world = copy.deepcopy(world)
    if r < 0.83:
        world.labs[lab_id].finished = True
    elif r < 0.85:
        world.done = True
    else:
        for b in rng.sample(list(world.blocks.values()), 6):
            if rng.random() < 0.5:
                b.no_resale = True
            else:
                b.must_allocate = True
    return world


# codes the odd moves must reach (the scenarios above reach every one)
EXPECTED_CODES = {
    "ok", "episode_done", "unknown_action_type", "seat_finished", "invalid_type", "invalid_payment",
    "list_too_long", "duplicate_ids", "empty_list", "message_too_long", "missing_field", "unknown_lab",
    "unknown_job", "unknown_block", "block_not_owned", "unknown_offer", "offer_not_open", "offer_not_addressed",
    "empty_message", "unknown_coalition", "block_too_late", "block_unreliable", "no_resale",
}


def test_odd_moves_on_sampled_states(rs: ModuleType) -> None:
    pool = states()
    types = list(ACTION_TYPES)
    makers = {(at, lab_id): OddMoves(world, lab_id) for at, world in enumerate(pool) for lab_id in world.labs}
    # for each type, the states and seats where a plausible move of it can go far
    ready = {kind: [key for key, maker in makers.items() if maker.ready(kind)] for kind in types}
    kinds: Counter[Any] = Counter()
    codes: Counter[str] = Counter()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(rng=st.randoms(use_true_random=True))
    def check(rng: random.Random) -> None:
        kind = rng.choice(types) if rng.random() < 0.95 else rng.choice(ODD_TYPES)
        keys = ready.get(kind) if isinstance(kind, str) and rng.random() < 0.85 else None
        at, lab_id = rng.choice(keys or list(makers))
        action = makers[at, lab_id].action(rng, kind)
        world = surgery(rng, pool[at], lab_id)
        got, want, code = answer(rs, world, lab_id, action)
        assert got == want, action
        kinds[action.action_type if isinstance(action.action_type, str) else "?"] += 1
        codes[code] += 1

    check()
    assert set(types) <= set(kinds), kinds
    missing = EXPECTED_CODES - set(codes)
    assert not missing, (missing, codes)
    assert len(codes) >= 30, codes


def test_fields_python_reads_but_rust_cannot(rs: ModuleType) -> None:
    """Where the value cannot cross into Rust (an int beyond 64 bits, a lone surrogate) the Rust
    side refuses to read the action instead of answering differently; Python's answer is a refusal
    by the rules."""
    world = states()[0]
    lab_id = next(iter(world.labs))
    cases = [
        (Action("send_offer", target_lab_id=list(world.labs)[1], payment=2**70), "invalid_payment"),
        (Action("send_offer", target_lab_id=list(world.labs)[1], payment=10**400), "invalid_payment"),
        (Action("send_message", message="a\ud800b"), "invalid_text"),
    ]
    for action, code in cases:
        (ok, (got_code, _message)), _state = py_apply(world, lab_id, action)
        assert not ok and got_code == code
        with pytest.raises((OverflowError, UnicodeEncodeError)):
            rs.rules_apply(world, lab_id, action)
