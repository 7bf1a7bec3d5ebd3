"""Unit tests: every action type's effect and every error code, on small hand-built worlds."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from gpu_arena.core.engine import Episode, RoundReport
from gpu_arena.core.rules import MAX_LIST, MAX_MESSAGE_CHARS, ActionError, apply_action
from gpu_arena.core.serialize import world_to_dict
from gpu_arena.core.types import Action, BlockStatus, World
from helpers import act, block, job, make_world, play, trade_world


def result(ep: Episode, lab: str = "lab_0") -> tuple[bool, str]:
    r = ep.last_results[lab]
    return r.ok, r.code


def assert_unchanged_by(world, lab: str, action: Action, code: str) -> None:
    """An invalid action raises with ``code`` and changes nothing at all."""
    before = world_to_dict(world)
    rng_state = world.rng.getstate()
    with pytest.raises(ActionError) as exc:
        apply_action(world, lab, action)
    assert exc.value.code == code, exc.value.message
    assert world_to_dict(world) == before
    assert world.rng.getstate() == rng_state


# ------------------------------------------------------------------ offers

def test_offer_accept_swaps_blocks_and_money_atomically():
    w = trade_world()
    ep = play(w, {"lab_0": act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0"],
                               requested_block_ids=["b_1_0"], payment=5.0)})
    assert result(ep) == (True, "ok")
    offer_id = next(iter(w.offers))
    ep.step({"lab_1": act("accept_offer", offer_id=offer_id)})
    assert result(ep, "lab_1") == (True, "ok")
    assert w.blocks["b_0_0"].owner == "lab_1" and w.blocks["b_1_0"].owner == "lab_0"
    assert w.labs["lab_0"].budget == pytest.approx(45.0)
    assert w.labs["lab_1"].budget == pytest.approx(55.0)
    assert w.offers[offer_id].status == "accepted"
    # a Pareto-improving deal raises both reputations
    assert w.labs["lab_0"].reputation > 0.6 and w.labs["lab_1"].reputation > 0.6
    assert ep.last_rewards["lab_0"]["deal_quality_score"] > 0
    assert ep.last_rewards["lab_1"]["deal_quality_score"] > 0


def test_requested_payment_moves_money_from_target():
    w = trade_world()
    ep = play(w, {"lab_1": act("send_offer", target_lab_id="lab_0", block_ids=["b_1_0"], requested_payment=12.0)})
    oid = next(iter(w.offers))
    ep.step({"lab_0": act("accept_offer", offer_id=oid, job_id="j_0_0")})
    assert w.labs["lab_0"].budget == pytest.approx(50.0 - 12.0 - w.blocks["b_1_0"].energy_paid)
    assert w.labs["lab_1"].budget == pytest.approx(62.0)
    # accept with job_id allocates the received block at once
    assert w.blocks["b_1_0"].status == BlockStatus.ALLOCATED and w.blocks["b_1_0"].job_id == "j_0_0"


def test_offer_with_sender_job_allocates_requested_blocks_on_settlement():
    w = trade_world()
    ep = play(w, {"lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=20.0,
                               job_id="j_0_0")})
    ep.step({"lab_1": act("accept_offer", offer_id=next(iter(w.offers)))})
    assert w.blocks["b_1_0"].owner == "lab_0" and w.blocks["b_1_0"].job_id == "j_0_0"


@pytest.mark.parametrize("action,code", [
    (act("send_offer", target_lab_id="lab_0", payment=1.0), "self_trade"),
    (act("send_offer", target_lab_id="lab_9", payment=1.0), "unknown_lab"),
    (act("send_offer", payment=1.0), "missing_field"),
    (act("send_offer", target_lab_id="lab_1"), "empty_offer"),
    (act("send_offer", target_lab_id="lab_1", payment=float("nan")), "invalid_payment"),
    (act("send_offer", target_lab_id="lab_1", payment=float("inf")), "invalid_payment"),
    (act("send_offer", target_lab_id="lab_1", payment=float("-inf")), "invalid_payment"),
    (act("send_offer", target_lab_id="lab_1", payment=-3.0), "invalid_payment"),
    (act("send_offer", target_lab_id="lab_1", payment="5"), "invalid_type"),
    (act("send_offer", target_lab_id="lab_1", payment=True), "invalid_type"),
    (act("send_offer", target_lab_id="lab_1", payment=500.0), "insufficient_budget"),
    (act("send_offer", target_lab_id="lab_1", requested_payment=500.0), "counterparty_cannot_pay"),
    (act("send_offer", target_lab_id="lab_1", payment=1.0, requested_payment=1.0), "invalid_payment"),
    (act("send_offer", target_lab_id="lab_1", block_ids=["b_9_9"]), "unknown_block"),
    (act("send_offer", target_lab_id="lab_1", block_ids=["b_1_0"]), "block_not_owned"),
    (act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_0_0"]), "block_not_owned"),
    (act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0", "b_0_0"]), "duplicate_ids"),
    (act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0"], requested_block_ids=["b_0_0"]), "duplicate_ids"),
    (act("send_offer", target_lab_id="lab_1", block_ids=[f"b_{i}" for i in range(MAX_LIST + 1)]), "list_too_long"),
    (act("send_offer", target_lab_id="lab_1", block_ids="b_0_0"), "invalid_type"),
    (act("send_offer", target_lab_id="lab_1", block_ids=[3]), "invalid_type"),
    (act("send_offer", target_lab_id="lab_1", payment=1.0, message="x" * (MAX_MESSAGE_CHARS + 1)), "message_too_long"),
    (act("send_offer", target_lab_id="lab_1", payment=1.0, conditions={"bogus": True}), "unknown_condition"),
    (act("send_offer", target_lab_id="lab_1", payment=1.0, conditions={"no_resale": "yes"}), "invalid_type"),
    (act("send_offer", target_lab_id="lab_1", payment=1.0, conditions=["no_resale"]), "invalid_type"),
    (act("send_offer", target_lab_id="lab_1", payment=1.0,
         conditions={"no_resale": True, "coalition_only": True, "must_allocate_to_job": True, "x": True}),
     "conditions_too_large"),
    (act("send_offer", target_lab_id="lab_1", payment=1.0, expires_in=0), "invalid_expiry"),
    (act("send_offer", target_lab_id="lab_1", payment=1.0, expires_in=99), "invalid_expiry"),
    (act("send_offer", target_lab_id="lab_1", payment=1.0, job_id="j_1_0"), "unknown_job"),
    (act("launch_rockets"), "unknown_action_type"),
    (act("accept_offer", offer_id="o_404"), "unknown_offer"),
    (act("accept_offer"), "missing_field"),
    (act("reserve_capacity", block_ids=[], job_id="j_0_0"), "empty_list"),
    (act("allocate_to_job", job_id="j_0_0", block_ids=["b_1_0"]), "block_not_owned"),
    (act("send_message", message="   "), "empty_message"),
    (act("make_pitch", payment=1.0), "no_contested_resource"),
    (act("commit_to_coalition", coalition_id="c_1"), "unknown_coalition"),
])
def test_bad_actions_raise_a_code_and_change_nothing(action, code):
    assert_unchanged_by(trade_world(), "lab_0", action, code)


def test_invalid_action_is_a_wait_with_penalty_and_reputation_loss():
    w = trade_world()
    ep = play(w, {"lab_0": act("send_offer", target_lab_id="lab_1", payment=float("nan"))})
    assert result(ep) == (False, "invalid_payment")
    row = ep.last_rewards["lab_0"]
    assert row["invalid_action_penalty"] == pytest.approx(-0.01)
    assert w.labs["lab_0"].reputation == pytest.approx(0.59)
    assert not w.offers


def test_cannot_accept_foreign_expired_or_settled_offers():
    w = trade_world()
    ep = play(w, {"lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=5.0,
                               expires_in=1)})
    oid = next(iter(w.offers))
    assert_unchanged_by(w, "lab_0", act("accept_offer", offer_id=oid), "offer_not_addressed")
    assert w.offers[oid].status == "open"  # made in round 0: answerable during round 1 only
    ep.step({})
    assert w.offers[oid].status == "expired"
    assert_unchanged_by(w, "lab_1", act("accept_offer", offer_id=oid), "offer_not_open")


def test_accepting_twice_fails_and_superseded_offers_never_settle():
    w = trade_world()
    ep = play(w, {"lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=5.0,
                               expires_in=4)})
    ep.step({"lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=6.0)})
    first, second = list(w.offers)
    ep.step({"lab_1": act("accept_offer", offer_id=second)})
    assert w.offers[first].status == "superseded"
    assert_unchanged_by(w, "lab_1", act("accept_offer", offer_id=second), "offer_not_open")
    assert_unchanged_by(w, "lab_1", act("accept_offer", offer_id=first), "offer_not_open")


def test_stale_offer_fails_whole_when_sender_no_longer_owns_block():
    w = trade_world()
    ep = play(w, {"lab_0": act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0"], payment=0.0,
                               expires_in=5)})
    oid = next(iter(w.offers))
    ep.step({"lab_0": act("reserve_capacity", block_ids=["b_0_0"], job_id="j_0_0")} if False else
            {"lab_0": act("allocate_to_job", job_id="j_0_0", block_ids=["b_0_0"])})
    # b_0_0 ends after j_0_0's deadline, so that allocation is refused; reserve it for nothing instead
    assert result(ep) == (False, "block_too_late")
    w.blocks["b_0_0"].status = BlockStatus.RESERVED
    assert_unchanged_by(w, "lab_1", act("accept_offer", offer_id=oid), "offer_stale")


def test_reject_and_withdraw():
    w = trade_world()
    ep = play(w, {"lab_0": act("send_offer", target_lab_id="lab_1", payment=1.0, expires_in=5),
                  "lab_1": act("send_offer", target_lab_id="lab_0", payment=1.0, expires_in=5)})
    o0 = next(o for o in w.offers.values() if o.sender == "lab_0")
    o1 = next(o for o in w.offers.values() if o.sender == "lab_1")
    ep.step({"lab_1": act("reject_offer", offer_id=o0.offer_id), "lab_0": act("reject_offer", offer_id=o0.offer_id)})
    assert o0.status in ("rejected", "withdrawn")
    ep.step({"lab_1": act("reject_offer", offer_id=o1.offer_id)})
    assert o1.status == "withdrawn"


def test_counter_offer_links_and_supersedes_original():
    w = trade_world()
    ep = play(w, {"lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=2.0)})
    oid = next(iter(w.offers))
    ep.step({"lab_1": act("counter_offer", offer_id=oid, block_ids=["b_1_0"], requested_payment=10.0)})
    assert result(ep, "lab_1") == (True, "ok")
    counter = next(o for o in w.offers.values() if o.parent_offer_id == oid)
    assert counter.sender == "lab_1" and counter.target == "lab_0"
    assert w.offers[oid].status == "countered"
    assert_unchanged_by(w, "lab_1", act("accept_offer", offer_id=oid), "offer_not_open")
    ep.step({"lab_0": act("accept_offer", offer_id=counter.offer_id)})
    assert w.blocks["b_1_0"].owner == "lab_0"


def test_condition_no_resale_blocks_onward_offers():
    w = trade_world()
    ep = play(w, {"lab_1": act("send_offer", target_lab_id="lab_0", block_ids=["b_1_0"], requested_payment=1.0,
                               conditions={"no_resale": True})})
    ep.step({"lab_0": act("accept_offer", offer_id=next(iter(w.offers)))})
    assert w.blocks["b_1_0"].no_resale
    assert_unchanged_by(w, "lab_0", act("send_offer", target_lab_id="lab_1", block_ids=["b_1_0"]), "no_resale")


def test_condition_coalition_only_needs_a_common_coalition():
    w = trade_world()
    ep = play(w, {"lab_1": act("send_offer", target_lab_id="lab_0", block_ids=["b_1_0"], requested_payment=1.0,
                               conditions={"coalition_only": True})})
    assert_unchanged_by(w, "lab_0", act("accept_offer", offer_id=next(iter(w.offers))), "condition_unmet")
    assert ep.world is w


def test_condition_must_allocate_is_a_breach_when_block_idles():
    w = trade_world()
    ep = play(w, {"lab_1": act("send_offer", target_lab_id="lab_0", block_ids=["b_1_1"], requested_payment=1.0,
                               conditions={"must_allocate_to_job": True})})
    rep = w.labs["lab_0"].reputation
    ep.step({"lab_0": act("accept_offer", offer_id=next(iter(w.offers)))})
    assert w.blocks["b_1_1"].must_allocate
    # b_1_1 starts at round 2, which the clock reaches after this step: unused -> breach
    assert w.round_index == 2
    assert w.blocks["b_1_1"].status == BlockStatus.IDLE
    assert w.labs["lab_0"].breaches == 1 and w.labs["lab_0"].reputation < rep
    assert ep.last_rewards["lab_0"]["breach_penalty"] < 0


def test_too_many_open_offers():
    w = trade_world()
    ep = play(w, *[{"lab_0": act("send_offer", target_lab_id="lab_1", payment=float(i + 1), expires_in=5)}
                   for i in range(4)])
    w.round_index = 0  # keep them open; the cap counts open offers
    for o in w.offers.values():
        o.expires_round = 5
    for i in range(2):
        apply_action(w, "lab_0", act("send_offer", target_lab_id="lab_1", payment=10.0 + i))
    assert_unchanged_by(w, "lab_0", act("send_offer", target_lab_id="lab_1", payment=20.0), "too_many_offers")
    assert ep is not None


# ------------------------------------------------------------------ allocation, reservations

def test_allocate_pays_energy_and_job_settles_at_deadline():
    w = make_world([block("b_0_0", "lab_0", gpus=4, start=1, duration=2, energy=0.5)],
                   [job("j_0_0", "lab_0", hours=8, deadline=3, value=40.0)], rounds=6)
    ep = play(w, {"lab_0": act("allocate_to_job", job_id="j_0_0", block_ids=["b_0_0"])})
    assert w.labs["lab_0"].budget == pytest.approx(50.0 - 4.0)
    assert w.blocks["b_0_0"].status == BlockStatus.RUNNING
    ep.step({})
    ep.step({})
    assert w.jobs["j_0_0"].status == "completed" and w.labs["lab_0"].realized_value == pytest.approx(40.0)
    assert w.blocks["b_0_0"].status == BlockStatus.DONE


@pytest.mark.parametrize("blk,jb,code", [
    (block("b_0_0", "lab_0", start=5, duration=3), job("j_0_0", "lab_0", deadline=6), "block_too_late"),
    (block("b_0_0", "lab_0", rel=0.7), job("j_0_0", "lab_0", min_rel=0.9), "block_unreliable"),
    (block("b_0_0", "lab_0", start=0), job("j_0_0", "lab_0"), "block_started"),
    (block("b_0_0", "lab_0", energy=100.0), job("j_0_0", "lab_0"), "insufficient_budget"),
])
def test_allocation_errors(blk, jb, code):
    w = make_world([blk], [jb])
    assert_unchanged_by(w, "lab_0", act("allocate_to_job", job_id="j_0_0", block_ids=["b_0_0"]), code)


def test_allocating_failed_or_used_blocks_and_closed_jobs():
    w = make_world([block("b_0_0", "lab_0"), block("b_0_1", "lab_0")], [job("j_0_0", "lab_0"), job("j_0_1", "lab_0")])
    w.blocks["b_0_1"].status = BlockStatus.FAILED
    assert_unchanged_by(w, "lab_0", act("allocate_to_job", job_id="j_0_0", block_ids=["b_0_1"]), "block_failed")
    apply_action(w, "lab_0", act("allocate_to_job", job_id="j_0_0", block_ids=["b_0_0"]))
    assert_unchanged_by(w, "lab_0", act("allocate_to_job", job_id="j_0_1", block_ids=["b_0_0"]), "block_used")
    w.jobs["j_0_1"].status = "failed"
    assert_unchanged_by(w, "lab_0", act("allocate_to_job", job_id="j_0_1", block_ids=[]), "job_closed")


def test_allocate_without_arguments_applies_best_plan():
    w = make_world([block("b_0_0", "lab_0", start=2), block("b_0_1", "lab_0", start=2)],
                   [job("j_0_0", "lab_0", hours=8), job("j_0_1", "lab_0", hours=8, value=20.0)])
    ep = play(w, {"lab_0": act("allocate_to_job")})
    assert {w.blocks["b_0_0"].job_id, w.blocks["b_0_1"].job_id} == {"j_0_0", "j_0_1"}
    assert ep.last_rewards["lab_0"]["job_utility_score"] == pytest.approx(0.0, abs=1e-12)


def test_reservation_protects_block_and_lapses_with_penalty():
    w = make_world([block("b_0_0", "lab_0", start=2)], [job("j_0_0", "lab_0")])
    ep = play(w, {"lab_0": act("reserve_capacity", block_ids=["b_0_0"], job_id="j_0_0")})
    assert w.blocks["b_0_0"].status == BlockStatus.RESERVED
    assert_unchanged_by(w, "lab_0", act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0"]), "block_reserved")
    assert_unchanged_by(w, "lab_1", act("send_offer", target_lab_id="lab_0", requested_block_ids=["b_0_0"],
                                        payment=1.0), "block_reserved")
    ep.step({})  # round 2: the window opens with the block unallocated
    assert w.blocks["b_0_0"].status == BlockStatus.IDLE
    assert ep.last_rewards["lab_0"]["spam_penalty"] < 0
    assert ep.last_rewards["lab_0"]["negotiation_efficiency_score"] < 0


def test_release_reservation_and_allocation_refunds_energy():
    w = make_world([block("b_0_0", "lab_0", start=4, energy=0.5)], [job("j_0_0", "lab_0")])
    play(w, {"lab_0": act("allocate_to_job", job_id="j_0_0", block_ids=["b_0_0"])},
         {"lab_0": act("release_capacity", block_ids=["b_0_0"])})
    assert w.blocks["b_0_0"].status == BlockStatus.FREE
    assert w.labs["lab_0"].budget == pytest.approx(50.0)
    assert_unchanged_by(w, "lab_0", act("release_capacity", block_ids=["b_0_0"]), "block_not_releasable")


# ------------------------------------------------------------------ coalitions

def coalition_world():
    blocks = [block("b_0_0", "lab_0", gpus=4, start=5, duration=2), block("b_1_0", "lab_1", gpus=4, start=5, duration=2),
              block("b_2_0", "lab_2", gpus=4, start=5, duration=2), block("b_2_1", "lab_2", gpus=1, start=2, duration=1)]
    jobs = [job("j_0_p", "lab_0", hours=24, deadline=8, value=120.0, min_rel=0.8, pooled=True),
            job("j_1_0", "lab_1", hours=2, deadline=9, value=5.0), job("j_2_0", "lab_2", hours=1, deadline=3, value=4.0)]
    return make_world(blocks, jobs, n_labs=3, rounds=8, task="coalition_market")


def form(w, shares=None):
    return act("form_coalition", job_id="j_0_p", member_lab_ids=["lab_1", "lab_2"], block_ids=["b_0_0"],
               requested_block_ids=["b_1_0", "b_2_0"], payment=6.0,
               shares=shares or {"lab_0": 0.5, "lab_1": 0.25, "lab_2": 0.25})


def test_coalition_forms_only_with_every_consent_and_settles_shares():
    w = coalition_world()
    ep = play(w, {"lab_0": form(w)})
    cid = next(iter(w.coalitions))
    ep.step({"lab_1": act("commit_to_coalition", coalition_id=cid)})
    assert w.coalitions[cid].status == "proposed"
    assert w.blocks["b_1_0"].status == BlockStatus.FREE
    ep.step({"lab_2": act("commit_to_coalition", coalition_id=cid)})
    c = w.coalitions[cid]
    assert c.status == "formed"
    assert all(w.blocks[b].status == BlockStatus.COMMITTED for b in ("b_0_0", "b_1_0", "b_2_0"))
    assert w.labs["lab_1"].budget > 50.0 - 1.0  # received part of the proposer's payment net of energy
    assert ep.last_rewards["lab_2"]["coalition_reliability_score"] > 0
    while not ep.done:
        ep.step({})
    assert w.jobs["j_0_p"].status == "completed"
    assert w.labs["lab_1"].realized_value >= 0.25 * 120.0 - 1e-9
    assert w.labs["lab_0"].reputation > 0.6  # honoured commitments


def formed_coalition():
    """The coalition world after lab_0 proposed and both members committed."""
    w = coalition_world()
    ep = play(w, {"lab_0": form(w)})
    cid = next(iter(w.coalitions))
    ep.step({"lab_1": act("commit_to_coalition", coalition_id=cid), "lab_2": act("commit_to_coalition", coalition_id=cid)})
    assert w.coalitions[cid].status == "formed"
    return w, ep, cid


def test_coalition_errors():
    w = coalition_world()
    assert_unchanged_by(w, "lab_0", form(w, {"lab_0": 0.5, "lab_1": 0.5}), "invalid_shares")
    assert_unchanged_by(w, "lab_0", form(w, {"lab_0": 0.5, "lab_1": 0.6, "lab_2": -0.1}), "invalid_shares")
    bad = act("form_coalition", job_id="j_0_p", member_lab_ids=["lab_1", "lab_2"], requested_block_ids=["b_1_0"],
              shares={"lab_0": 0.5, "lab_1": 0.25, "lab_2": 0.25})
    assert_unchanged_by(w, "lab_0", bad, "member_without_blocks")
    notpooled = act("form_coalition", job_id="j_1_0", member_lab_ids=["lab_0"], requested_block_ids=["b_0_0"],
                    shares={"lab_0": 0.5, "lab_1": 0.5})
    assert_unchanged_by(w, "lab_1", notpooled, "job_not_poolable")
    apply_action(w, "lab_0", form(w))
    cid = next(iter(w.coalitions))
    assert_unchanged_by(w, "lab_0", act("commit_to_coalition", coalition_id=cid), "already_committed")
    w2 = coalition_world()
    w2.labs["lab_3"] = copy.deepcopy(w2.labs["lab_2"])
    w2.labs["lab_3"].lab_id = "lab_3"
    apply_action(w2, "lab_0", form(w2))
    assert_unchanged_by(w2, "lab_3", act("commit_to_coalition", coalition_id=next(iter(w2.coalitions))),
                        "not_a_member")


def test_withdrawing_committed_block_is_a_breach_but_a_shock_is_excused():
    w, ep, cid = formed_coalition()
    rep = w.labs["lab_1"].reputation
    ep.step({"lab_1": act("release_capacity", block_ids=["b_1_0"])})
    assert w.coalitions[cid].breaches == ["lab_1"]
    assert w.labs["lab_1"].reputation == pytest.approx(rep - 0.15)
    assert ep.last_rewards["lab_1"]["breach_penalty"] < 0
    assert ep.last_rewards["lab_0"]["coalition_reliability_score"] < 0  # the pool lost hours
    # committing a block twice: it is no longer free for another proposal
    assert_unchanged_by(w, "lab_2", act("send_offer", target_lab_id="lab_0", block_ids=["b_2_0"]), "block_committed")


def test_coalition_with_vanished_block_fails_without_transfers():
    w = coalition_world()
    ep = play(w, {"lab_0": form(w)})
    cid = next(iter(w.coalitions))
    w.blocks["b_2_0"].status = BlockStatus.FAILED
    ep.step({"lab_1": act("commit_to_coalition", coalition_id=cid), "lab_2": act("commit_to_coalition", coalition_id=cid)})
    assert w.coalitions[cid].status in ("failed", "proposed")
    assert w.blocks["b_1_0"].status == BlockStatus.FREE
    assert w.labs["lab_0"].budget == pytest.approx(50.0)


# ------------------------------------------------------------------ pitches and auctions

def auction_world():
    from gpu_arena.core.types import Auction

    w = make_world([block("b_a1", None, gpus=8, start=4, duration=2)], [job("j_0_0", "lab_0", hours=16, deadline=8),
                   job("j_1_0", "lab_1", hours=16, deadline=8)])
    w.blocks["b_a1"].status = BlockStatus.AUCTION
    w.auctions["a_1"] = Auction("a_1", "b_a1", opened_round=0, close_round=2)
    return w


def test_pitches_counter_pitches_and_award():
    w = auction_world()
    ep = play(w, {"lab_0": act("make_pitch", payment=10.0, job_id="j_0_0", message="our job is due at round 8"),
                  "lab_1": act("make_pitch", payment=8.0)})
    assert_unchanged_by(w, "lab_1", act("counter_pitch", target_lab_id="lab_0", payment=9.0), "pitch_too_low")
    assert_unchanged_by(w, "lab_1", act("make_pitch", payment=20.0), "already_pitched")
    assert_unchanged_by(w, "lab_1", act("counter_pitch", target_lab_id="lab_0", payment=999.0), "insufficient_budget")
    ep.step({"lab_1": act("counter_pitch", target_lab_id="lab_0", payment=12.0, message="we pay more")})
    assert w.auctions["a_1"].status == "awarded" and w.auctions["a_1"].winner == "lab_1"
    assert w.blocks["b_a1"].owner == "lab_1" and w.labs["lab_1"].budget == pytest.approx(38.0)
    assert ep.last_rewards["lab_1"]["judge_argument_score"] > 0
    assert_unchanged_by(w, "lab_0", act("make_pitch", payment=1.0), "no_contested_resource")


# ------------------------------------------------------------------ messages, wait, finish, spam

def test_messages_reach_target_or_everyone():
    w = make_world([], [], n_labs=3)
    ep = play(w, {"lab_0": act("send_message", target_lab_id="lab_1", message="hi")})
    from gpu_arena.core.observe import observe

    assert [m.text for m in observe(w, "lab_1").message_history] == ["hi"]
    assert observe(w, "lab_2").message_history == ()
    ep.step({"lab_2": act("send_message", message="all")})
    assert [m.text for m in observe(w, "lab_0").message_history] == ["hi", "all"]


def test_repeating_the_same_action_is_spam():
    w = trade_world()
    msg = act("send_message", target_lab_id="lab_1", message="buy my block")
    ep = play(w, {"lab_0": msg}, {"lab_0": msg})
    assert ep.last_rewards["lab_0"]["spam_penalty"] < 0


def test_finish_allocates_optimally_and_ends_episode_for_controlled_seat():
    w = make_world([block("b_0_0", "lab_0", start=3)], [job("j_0_0", "lab_0")])
    ep = Episode(w, controlled=("lab_0",))
    ep.step({"lab_0": act("finish")})
    assert w.blocks["b_0_0"].status == BlockStatus.ALLOCATED
    assert ep.done and w.jobs["j_0_0"].status == "completed"
    assert ep.returns["lab_0"] == pytest.approx(0.0, abs=1e-12)  # finishing forfeits nothing


def test_finished_seat_can_only_wait():
    w = make_world([block("b_0_0", "lab_0", start=3)], [job("j_0_0", "lab_0")])
    apply_action(w, "lab_0", act("finish"))
    assert_unchanged_by(w, "lab_0", act("send_message", message="hi"), "seat_finished")


def test_step_after_done_raises():
    from gpu_arena.core.engine import EpisodeOver

    ep = Episode.new("single_trade", "train", 1)
    while not ep.done:
        ep.step({})
    with pytest.raises(EpisodeOver):
        ep.step({})


def test_a_block_cannot_be_committed_to_two_coalitions():
    w, _ep, cid = formed_coalition()
    second = act("form_coalition", job_id="j_0_p", member_lab_ids=["lab_1"], requested_block_ids=["b_1_0"],
                 shares={"lab_0": 0.5, "lab_1": 0.5})
    assert_unchanged_by(w, "lab_0", second, "coalition_exists")
    w.jobs["j_0_p"].coalition_id = None  # even for another pooled job, the block is held
    w.coalitions[cid].status = "settled"
    assert_unchanged_by(w, "lab_0", second, "block_committed")


def test_episode_metrics():
    from gpu_arena.core.policy import NoNegotiationPolicy, RandomPolicy
    from gpu_arena.core.valuation import LabValuer

    for seed in range(6):
        ep = Episode.new("single_trade", "train", seed, controlled=())
        batna = sum(LabValuer(ep.world, lid).plan().net for lid in ep.world.labs)
        pols = {lid: NoNegotiationPolicy() for lid in ep.world.labs}
        while not ep.done:
            ep.step({lid: p.act(ep.observe(lid)) for lid, p in pols.items()})
        m = ep.metrics()
        assert m["welfare"] == pytest.approx(batna, abs=1e-6)  # no trade: welfare is the sum of BATNAs
        assert 0 <= m["welfare_ratio"] <= 1 + 1e-9
        assert set(m["labs"]["lab_0"]) >= {"utility", "surplus_over_batna", "deal_rate", "breach_rate", "invalid_rate"}
        assert all(v["surplus_over_batna"] == pytest.approx(0.0, abs=1e-9) for v in m["labs"].values())
        ep = Episode.new("single_trade", "train", seed, controlled=())
        pols = {lid: RandomPolicy(seed + i, invalid_rate=0.3) for i, lid in enumerate(ep.world.labs)}
        while not ep.done:
            ep.step({lid: p.act(ep.observe(lid)) for lid, p in pols.items()})
        m = ep.metrics()
        # without shocks nothing beats the planner's optimum
        assert m["welfare"] <= m["optimum"] + 1e-6
        for lid, lab in ep.world.labs.items():
            assert m["labs"][lid]["invalid_rate"] == pytest.approx(lab.invalid_actions / lab.actions)
            assert m["labs"][lid]["utility"] == pytest.approx(lab.realized_value + lab.budget - lab.initial_budget)


# ------------------------------------------------------------------ regressions (found in review)

def test_conditioned_blocks_cannot_leave_by_being_requested():
    w = trade_world()
    ep = play(w, {"lab_1": act("send_offer", target_lab_id="lab_0", block_ids=["b_1_0"], requested_payment=1.0,
                               conditions={"no_resale": True, "must_allocate_to_job": True})})
    ep.step({"lab_0": act("accept_offer", offer_id=next(iter(w.offers)))})
    assert_unchanged_by(w, "lab_1", act("send_offer", target_lab_id="lab_0", requested_block_ids=["b_1_0"],
                                        payment=5.0), "no_resale")


def test_huge_integers_are_invalid_payments_not_crashes():
    w = trade_world()
    assert_unchanged_by(w, "lab_0", act("send_offer", target_lab_id="lab_1", payment=10**400), "invalid_payment")
    ep = play(w, {"lab_0": act("send_offer", target_lab_id="lab_1", payment=10**400)})
    assert result(ep) == (False, "invalid_payment")


def test_releasing_a_block_from_a_pooled_job_is_booked_to_the_partners_at_once():
    w = coalition_world()
    ep = Episode(w, controlled=())  # incremental ledger: the partners must be marked by the release itself
    ep.step({"lab_0": act("form_coalition", job_id="j_0_p", member_lab_ids=["lab_1", "lab_2"],
                          requested_block_ids=["b_1_0", "b_2_0"], shares={"lab_0": 0.5, "lab_1": 0.25, "lab_2": 0.25})})
    cid = next(iter(w.coalitions))
    ep.step({"lab_1": act("commit_to_coalition", coalition_id=cid), "lab_2": act("commit_to_coalition", coalition_id=cid),
             "lab_0": act("allocate_to_job", job_id="j_0_p", block_ids=["b_0_0"])})
    assert w.coalitions[cid].status == "formed" and w.blocks["b_0_0"].job_id == "j_0_p"
    ep.step({"lab_0": act("release_capacity", block_ids=["b_0_0"])})
    assert ep.last_rewards["lab_1"]["normalized_reward"] < 0  # the pool lost 8 of its 24 hours
    fresh = Episode(w, controlled=())
    assert all(abs(sum(fresh.phi[lid]) - ep.potential(lid)) < 1e-9 for lid in w.labs)


def test_an_invalid_pitch_is_penalised_even_after_another_pitch():
    from gpu_arena.core.types import Auction

    w = make_world([block("b_a1", None, gpus=8, start=4, duration=2)], [job("j_0_0", "lab_0", hours=16, deadline=8),
                   job("j_1_0", "lab_1", hours=16, deadline=8)])
    w.blocks["b_a1"].status = BlockStatus.AUCTION
    w.auctions["a_1"] = Auction("a_1", "b_a1", opened_round=0, close_round=3)
    ep = Episode(w, controlled=())
    for _ in range(4):  # whatever the resolution order, the over-budget bid is a mistake
        if w.done or w.auctions["a_1"].status != "open":
            break
        ep.step({"lab_0": act("make_pitch", payment=1.0) if "lab_0" not in w.auctions["a_1"].pitches else act("wait"),
                 "lab_1": act("counter_pitch", target_lab_id="lab_0", payment=1e6)})
        if ep.last_results["lab_1"].code == "insufficient_budget":
            assert ep.last_rewards["lab_1"]["invalid_action_penalty"] < 0


def _first_round_orders(world_factory: Callable[[int], World], actions: dict[str, Action],
                        ) -> dict[bool, tuple[World, Episode, RoundReport]]:
    """Play the same first round under several world seeds until both resolution orders are seen
    (key: whether lab_1 moved before lab_0)."""
    seen: dict[bool, tuple[World, Episode, RoundReport]] = {}
    for seed in range(40):
        w = world_factory(seed)
        ep = Episode(w, controlled=())
        report = ep.step(actions)
        first = report.order.index("lab_1") < report.order.index("lab_0")
        seen.setdefault(first, (w, ep, report))
        if len(seen) == 2:
            return seen
    raise AssertionError("both orders should occur within 40 seeds")


def test_a_move_overtaken_in_the_same_round_is_a_conflict_not_a_mistake():
    def world(seed: int) -> World:
        return make_world([block("b_1_0", "lab_1", start=3)], [job("j_0_0", "lab_0"), job("j_1_0", "lab_1")],
                          seed=seed)

    seen = _first_round_orders(world, {
        "lab_1": act("allocate_to_job", job_id="j_1_0", block_ids=["b_1_0"]),
        "lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=1.0)})
    w, ep, report = seen[True]  # lab_1 allocated first: the block is gone when lab_0's offer lands
    assert report.results["lab_0"].code == "block_not_tradeable"
    assert w.labs["lab_0"].invalid_actions == 0 and ep.last_rewards["lab_0"]["invalid_action_penalty"] == 0
    w, ep, report = seen[False]
    assert report.results["lab_0"].ok
    # the same request with nothing moving first is a mistake and is penalised
    ep.step({"lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=1.0)})
    assert ep.last_results["lab_0"].code == "block_not_tradeable" and w.labs["lab_0"].invalid_actions == 1


def test_taking_an_offer_whose_sender_spent_the_money_earlier_in_the_round_is_a_conflict():
    from gpu_arena.core.types import Offer

    def world(seed: int) -> World:
        w = make_world([block("b_1_0", "lab_1", start=3, energy=2.0), block("b_0_0", "lab_0", start=4)],
                       [job("j_1_0", "lab_1")], seed=seed, budget=20.0)
        # lab_1 offered 10 for b_0_0 when it still had its 20
        w.offers["o_1"] = Offer("o_1", "lab_1", "lab_0", (), ("b_0_0",), 10.0, created_round=0, expires_round=3)
        return w

    # lab_1's allocation costs 16 of its 20 in energy; lab_0 takes lab_1's offer in the same round
    seen = _first_round_orders(world, {
        "lab_1": act("allocate_to_job", job_id="j_1_0", block_ids=["b_1_0"]),
        "lab_0": act("accept_offer", offer_id="o_1")})
    w, ep, report = seen[True]
    assert report.results["lab_0"].code == "offer_stale"
    assert w.labs["lab_0"].invalid_actions == 0 and ep.last_rewards["lab_0"]["invalid_action_penalty"] == 0
    assert w.blocks["b_0_0"].owner == "lab_0"  # nothing was half-applied
    # taking it again, with no move in between, is a mistake
    ep.step({"lab_0": act("accept_offer", offer_id="o_1")})
    assert ep.last_results["lab_0"].code == "offer_stale" and w.labs["lab_0"].invalid_actions == 1
    w, ep, report = seen[False]
    assert report.results["lab_0"].ok and w.blocks["b_0_0"].owner == "lab_1"


def test_asking_for_money_spent_earlier_in_the_round_is_a_conflict():
    def world(seed: int) -> World:
        return make_world([block("b_1_0", "lab_1", start=3, energy=2.0), block("b_0_0", "lab_0", start=4)],
                          [job("j_1_0", "lab_1")], seed=seed, budget=20.0)

    # lab_1's allocation costs 16 of its 20 in energy; lab_0 asks lab_1 for 10 for a block
    seen = _first_round_orders(world, {
        "lab_1": act("allocate_to_job", job_id="j_1_0", block_ids=["b_1_0"]),
        "lab_0": act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0"], requested_payment=10.0)})
    w, ep, report = seen[True]
    assert report.results["lab_0"].code == "counterparty_cannot_pay"
    assert w.labs["lab_0"].invalid_actions == 0 and ep.last_rewards["lab_0"]["invalid_action_penalty"] == 0
    assert not w.offers  # nothing was half-applied
    # asking for more than the lab visibly has, with no move in between, is a mistake
    ep.step({"lab_0": act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0"], requested_payment=10.0)})
    assert ep.last_results["lab_0"].code == "counterparty_cannot_pay" and w.labs["lab_0"].invalid_actions == 1
