"""Behaviour tests for rule_expert and oracle (decision 0015), on small hand-built worlds, and the
own-view bundle pricing they use."""

from __future__ import annotations

import pytest

from gpu_arena.core.engine import Episode
from gpu_arena.core.observe import observe
from gpu_arena.core.policy import seat_view
from gpu_arena.core.rules import MAX_LIST
from gpu_arena.core.types import Auction, Pitch
from gpu_arena.core.valuation import LabValuer
from gpu_arena.core.worldgen import generate_world
from gpu_arena.policies import make_policy
from gpu_arena.policies.expert import RuleExpertPolicy
from gpu_arena.policies.oracle import OraclePolicy
from gpu_arena.policies.planning import OwnPlanner
from helpers import act, block, job, make_world


def run(world, policies: dict) -> Episode:
    """Play a whole episode with a policy in every listed seat (others wait)."""
    ep = Episode(world, controlled=())
    while not ep.done:
        actions = {}
        for lid, pol in policies.items():
            actions[lid] = pol.act(seat_view(pol, ep, lid))
        ep.step(actions)
    return ep


@pytest.mark.parametrize(("task", "seed"), [("market_round", 0), ("market_round", 5), ("coalition_market", 1),
                                            ("coalition_market", 4)])
def test_own_planner_prices_like_the_views_aids(task, seed):
    w = generate_world(task, "train", seed)
    view = observe(w, "lab_0")
    planner = OwnPlanner(view)
    assert planner.net() == pytest.approx(LabValuer(w, "lab_0").net())
    for b in view.public_market.blocks:
        if b.marginal_value is not None:
            assert planner.gain([b]) == pytest.approx(b.marginal_value, abs=1e-9)
    # a bundle and a payment: exactly what the server's valuation gives for the same holdings
    market = [b for b in view.public_market.blocks if b.start_round > 0][:3]
    valuer = LabValuer(w, "lab_0")
    expected = valuer.net(extra=[w.blocks[b.block_id] for b in market], money=-5.0) - valuer.net() - 5.0
    assert planner.gain(market, pay=5.0) == pytest.approx(expected)


def pool_world(extra_blocks: int = 0):
    """lab_0 owns a pooled job of 24 h it cannot fill alone; lab_1 and lab_2 hold the rest."""
    blocks = [block("b_0_0", "lab_0", gpus=4, start=5, duration=2), block("b_1_0", "lab_1", gpus=4, start=5, duration=2),
              block("b_2_0", "lab_2", gpus=4, start=5, duration=2), block("b_2_1", "lab_2", gpus=1, start=2, duration=1)]
    blocks += [block(f"b_1_{i + 1}", "lab_1", gpus=1, start=6, duration=1) for i in range(extra_blocks)]
    jobs = [job("j_0_p", "lab_0", hours=24, deadline=8, value=120.0, min_rel=0.8, pooled=True),
            job("j_1_0", "lab_1", hours=2, deadline=9, value=5.0), job("j_2_0", "lab_2", hours=1, deadline=3, value=4.0)]
    return make_world(blocks, jobs, n_labs=3, rounds=8, task="coalition_market", budget=80.0)


def test_rule_expert_pools_capacity_for_its_pooled_job_and_completes_it():
    w = pool_world()
    me = RuleExpertPolicy(seed=0)
    first = me.act(observe(w, "lab_0"))
    assert first.action_type == "form_coalition" and first.job_id == "j_0_p"
    # all the value is its own; the members are paid money, which they weigh split equally
    assert first.shares == {"lab_0": 1.0, "lab_1": 0.0, "lab_2": 0.0} and first.payment > 0
    assert set(first.requested_block_ids) == {"b_1_0", "b_2_0"} and first.block_ids == ("b_0_0",)
    w = pool_world()
    ep = run(w, {"lab_0": RuleExpertPolicy(seed=0),
                 "lab_1": make_policy("cooperative", seed=1, acceptance_margin=0.1),
                 "lab_2": make_policy("selfish", seed=2, acceptance_margin=0.1)})
    assert any(c.proposer == "lab_0" and c.status == "settled" for c in w.coalitions.values())
    assert w.jobs["j_0_p"].status == "completed"
    assert ep.returns["lab_0"] > 0  # completion was worth more than what it paid


def test_a_pool_proposal_stays_within_the_list_limit():
    w = pool_world(extra_blocks=MAX_LIST + 4)
    w.jobs["j_0_p"].gpu_hours_required = 8 + 8 + 8 + MAX_LIST + 4  # needs every small block too
    action = RuleExpertPolicy(seed=0).act(observe(w, "lab_0"))
    if action.action_type == "form_coalition":
        assert len(action.requested_block_ids) <= MAX_LIST
        ep = Episode(w, controlled=())
        ep.step({"lab_0": action})
        assert ep.last_results["lab_0"].ok, ep.last_results["lab_0"]


def member_world(payment: float):
    """lab_1 asks lab_0 to commit b_0_0, which lab_0 does not use but which costs 16 to run."""
    blocks = [block("b_0_0", "lab_0", gpus=4, start=5, duration=2, energy=2.0),
              block("b_1_0", "lab_1", gpus=4, start=5, duration=2)]
    jobs = [job("j_1_p", "lab_1", hours=16, deadline=8, value=60.0, min_rel=0.8, pooled=True),
            job("j_0_0", "lab_0", hours=2, deadline=3, value=5.0)]
    w = make_world(blocks, jobs, n_labs=2, rounds=8, task="coalition_market", budget=80.0)
    ep = Episode(w, controlled=())
    ep.step({"lab_1": act("form_coalition", job_id="j_1_p", member_lab_ids=["lab_0"], block_ids=["b_1_0"],
                          requested_block_ids=["b_0_0"], payment=payment, shares={"lab_1": 1.0, "lab_0": 0.0})})
    return ep


def test_rule_expert_counts_the_energy_it_pays_before_committing_to_a_coalition():
    # the block is worth nothing to lab_0's plan, but committing it means paying 16 of energy
    cheap = member_world(payment=10.0)
    assert cheap.observe("lab_0").owned_blocks[0].marginal_value == pytest.approx(0.0)
    assert RuleExpertPolicy(seed=0).act(cheap.observe("lab_0")).action_type != "commit_to_coalition"
    fair = member_world(payment=20.0)
    assert RuleExpertPolicy(seed=0).act(fair.observe("lab_0")).action_type == "commit_to_coalition"


def auction_world(budget: float):
    """An emergency-auction block that completes lab_0's job, whose energy (16) must still be paid."""
    blocks = [block("b_0_0", "lab_0", gpus=4, start=6, duration=2, energy=0.1),
              block("b_a_1", None, gpus=8, start=4, duration=1, energy=2.0)]
    blocks[1].status = "auction"
    w = make_world(blocks, [job("j_0_0", "lab_0", hours=16, deadline=9, value=60.0)], n_labs=2, rounds=8,
                   budget=budget)
    w.auctions["a_1"] = Auction("a_1", "b_a_1", opened_round=0, close_round=2)
    return w


def test_rule_expert_never_bids_away_the_money_the_block_needs_to_run():
    w = auction_world(budget=30.0)
    view = observe(w, "lab_0")
    action = RuleExpertPolicy(seed=0).act(view)
    assert action.action_type == "make_pitch"
    # after paying the bid it can still pay the block's energy, with a gain left
    planner = OwnPlanner(view)
    block_view = next(b for b in view.public_market.blocks if b.block_id == "b_a_1")
    assert planner.gain([block_view], pay=action.payment) > 0
    assert action.payment <= 30.0 - 16.0 - 0.8 + 1e-9
    # a rival's higher bid is countered only up to that cap
    w.auctions["a_1"].pitches["lab_1"] = Pitch("lab_1", 25.0, None, "", 0)
    assert RuleExpertPolicy(seed=0).act(observe(w, "lab_0")).action_type != "counter_pitch"


def test_rule_expert_allocates_for_the_auction_it_leads():
    # b_0_0 serves j_0_1 on its own, or, with the auction block, completes the bigger j_0_0: while it
    # leads the auction, it allocates b_0_0 (opening next round) to j_0_0
    blocks = [block("b_0_0", "lab_0", gpus=4, start=3, duration=2),
              block("b_a_1", None, gpus=4, start=4, duration=2)]
    blocks[1].status = "auction"
    jobs = [job("j_0_0", "lab_0", hours=16, deadline=9, value=80.0), job("j_0_1", "lab_0", hours=8, deadline=9, value=20.0)]
    w = make_world(blocks, jobs, n_labs=2, rounds=8, budget=60.0)
    w.round_index = 2
    w.auctions["a_1"] = Auction("a_1", "b_a_1", opened_round=1, close_round=3,
                                pitches={"lab_0": Pitch("lab_0", 10.0, "j_0_0", "", 1)})
    view = observe(w, "lab_0")
    assert view.best_plan == {"j_0_1": ("b_0_0",)}
    action = RuleExpertPolicy(seed=0).act(view)
    assert action.action_type == "allocate_to_job" and action.job_id == "j_0_0" and action.block_ids == ("b_0_0",)


def test_rule_expert_does_not_sell_a_block_its_next_round_needs_in_place_of_allocating():
    # lab_1 bids 6 for b_0_0; selling it is worth it only if b_0_1 (opening next round) took its
    # place, which needs an allocation this very round: answering the offer would leave b_0_1 idle
    blocks = [block("b_0_0", "lab_0", gpus=4, start=4, duration=2), block("b_0_1", "lab_0", gpus=4, start=2, duration=2)]
    jobs = [job("j_0_0", "lab_0", hours=8, deadline=9, value=30.0), job("j_1_0", "lab_1", hours=8, deadline=9, value=30.0)]
    w = make_world(blocks, jobs, n_labs=2, rounds=8)
    w.blocks["b_0_1"].energy_cost = 0.2  # b_0_0 is the cheaper one: the plan runs it, not b_0_1
    ep = Episode(w, controlled=())
    ep.step({"lab_1": act("send_offer", target_lab_id="lab_0", requested_block_ids=["b_0_0"], payment=6.0)})
    view = ep.observe("lab_0")
    offer = next(o for o in view.active_offers if o.direction == "incoming")
    assert offer.value_to_me > 0  # the view's aid prices it as if b_0_1 could still be allocated
    policy = RuleExpertPolicy(seed=0)
    assert policy.offer_value(view, offer, OwnPlanner(view)) < 0
    assert policy.act(view).action_type != "accept_offer"


def test_rule_expert_never_spends_a_turn_rejecting():
    # a bid far below what b_0_0 is worth to lab_0, from a lab that could not pay its price: the
    # offer is left to expire and the turn goes to something useful
    blocks = [block("b_0_0", "lab_0", gpus=4, start=5, duration=2), block("b_1_0", "lab_1", gpus=2, start=6)]
    jobs = [job("j_0_0", "lab_0", hours=8, deadline=9, value=40.0), job("j_0_1", "lab_0", hours=2, deadline=9,
                                                                            value=10.0)]
    w = make_world(blocks, jobs, n_labs=2, rounds=8)
    w.labs["lab_1"].budget = 3.0
    ep = Episode(w, controlled=())
    ep.step({"lab_1": act("send_offer", target_lab_id="lab_0", requested_block_ids=["b_0_0"], payment=2.0)})
    action = RuleExpertPolicy(seed=0).act(ep.observe("lab_0"))
    assert action.action_type not in ("reject_offer", "accept_offer", "wait")
    for seed in range(3):
        world = generate_world("market_round", "train", seed)
        pol = RuleExpertPolicy(seed=seed)
        ep = Episode(world, controlled=())
        bots = {lid: make_policy(lab.archetype, seed=seed, **lab.params)
                for lid, lab in world.labs.items() if lid != "lab_0"}
        while not ep.done:
            actions = {lid: p.act(ep.observe(lid)) for lid, p in bots.items()}
            actions["lab_0"] = pol.act(ep.observe("lab_0"))
            assert actions["lab_0"].action_type != "reject_offer"
            ep.step(actions)


def test_oracle_bids_exactly_what_the_seller_accepts():
    # lab_1 uses b_1_0 (worth about 30 to it): the oracle's bid covers that and its margin, no more
    blocks = [block("b_1_0", "lab_1", gpus=4, start=4, duration=2), block("b_0_9", "lab_0", gpus=1, start=7)]
    jobs = [job("j_1_0", "lab_1", hours=8, deadline=8, value=30.0), job("j_0_0", "lab_0", hours=8, deadline=8, value=60.0)]
    w = make_world(blocks, jobs, rounds=6)
    w.labs["lab_1"].archetype, w.labs["lab_1"].params = "selfish", {"acceptance_margin": 0.1}
    oracle = OraclePolicy(seed=0)
    oracle.bind(w)
    bid = oracle.act(observe(w, "lab_0"))
    assert bid.action_type == "send_offer" and bid.requested_block_ids == ("b_1_0",)
    seller = LabValuer(w, "lab_1")
    loss = seller.net() - seller.net(without=("b_1_0",))
    assert loss < bid.payment < loss * 1.5
    ep = Episode(w, controlled=())
    ep.step({"lab_0": bid})
    answer = make_policy("selfish", seed=0, acceptance_margin=0.1).act(ep.observe("lab_1"))
    assert answer.action_type == "accept_offer"


def test_rule_expert_opens_an_auction_low_and_raises_only_when_outbid():
    # pitches are taken in rounds 0 and 1 (first-price): round 0 opens low, since a rival's pitch
    # can still be answered in round 1
    w = auction_world(budget=80.0)
    value = next(b.marginal_value for b in observe(w, "lab_0").public_market.blocks if b.block_id == "b_a_1")
    assert value is not None and value > 10
    opening = RuleExpertPolicy(seed=0).act(observe(w, "lab_0"))
    assert opening.action_type == "make_pitch" and 0 < opening.payment <= 0.15 * value
    # it leads: nothing to raise
    w.auctions["a_1"].pitches["lab_0"] = Pitch("lab_0", opening.payment, "j_0_0", "", 0)
    assert RuleExpertPolicy(seed=0).act(observe(w, "lab_0")).action_type != "counter_pitch"
    # outbid with a round left: it answers just above the rival
    rival = opening.payment + 3.0
    w.auctions["a_1"].pitches["lab_1"] = Pitch("lab_1", rival, None, "", 0)
    answer = RuleExpertPolicy(seed=0).act(observe(w, "lab_0"))
    assert answer.action_type == "counter_pitch" and answer.target_lab_id == "lab_1"
    assert rival < answer.payment <= rival + 1.0 + 1e-9
    # in the last round a rival may still answer in the same round: it leaves a step of room
    w.round_index = 1
    last = RuleExpertPolicy(seed=0).act(observe(w, "lab_0"))
    assert last.action_type == "counter_pitch" and last.payment >= rival + max(1.0, 0.1 * value) - 0.01


def test_rule_expert_keeps_what_its_pool_proposal_names():
    # while its proposal gathers consents, it neither sells a block it committed nor buys one it
    # asked a member for (either breaks the proposal), and keeps the payment in its budget
    w = pool_world()
    me = RuleExpertPolicy(seed=0)
    proposal = me.act(observe(w, "lab_0"))
    assert proposal.action_type == "form_coalition"
    ep = Episode(w, controlled=())
    ep.step({"lab_0": proposal,
             "lab_1": act("send_offer", target_lab_id="lab_0", requested_block_ids=["b_0_0"], payment=60.0),
             "lab_2": act("send_offer", target_lab_id="lab_0", block_ids=["b_2_0"], payment=1.0)})
    view = ep.observe("lab_0")
    incoming = [o for o in view.active_offers if o.direction == "incoming"]
    sale = next(o for o in incoming if o.requested_block_ids == ("b_0_0",))
    assert me.offer_value(view, sale, OwnPlanner(view)) > 10  # worth taking, were it not for the proposal
    held, reserve = me.pool_hold(view)
    assert {"b_0_0", "b_1_0", "b_2_0"} <= held and reserve >= proposal.payment
    action = me.act(view)
    assert action.action_type != "accept_offer"
    assert not (action.action_type == "send_offer" and held & {*action.requested_block_ids, *action.block_ids})
    assert (action.payment or 0.0) <= view.controlled_lab_budget - reserve + 1e-9


def test_rule_expert_counts_a_proposers_own_blocks_toward_completion():
    # lab_1 proposes the scripted way: it asks for b_0_0 and commits none of its own blocks, but its
    # own fitting block b_1_0 completes the job with b_0_0; lab_0's half share is then worth
    # committing a block that costs it 16 of energy for a payment of 5
    def proposal(own_block_fits: bool) -> Episode:
        blocks = [block("b_0_0", "lab_0", gpus=4, start=5, duration=2, energy=2.0),
                  block("b_1_0", "lab_1", gpus=4, start=5, duration=2, rel=0.95 if own_block_fits else 0.5)]
        jobs = [job("j_1_p", "lab_1", hours=16, deadline=8, value=60.0, min_rel=0.8, pooled=True),
                job("j_0_0", "lab_0", hours=2, deadline=3, value=5.0)]
        w = make_world(blocks, jobs, n_labs=2, rounds=8, task="coalition_market", budget=80.0)
        ep = Episode(w, controlled=())
        ep.step({"lab_1": act("form_coalition", job_id="j_1_p", member_lab_ids=["lab_0"],
                              requested_block_ids=["b_0_0"], payment=5.0, shares={"lab_1": 0.5, "lab_0": 0.5})})
        return ep

    assert RuleExpertPolicy(seed=0).act(proposal(True).observe("lab_0")).action_type == "commit_to_coalition"
    # the same proposal whose pool stays short (b_1_0 is below the job's reliability floor) pays a fifth
    assert RuleExpertPolicy(seed=0).act(proposal(False).observe("lab_0")).action_type != "commit_to_coalition"


def idle_risk_world():
    """lab_0's pooled job (24 h) needs lab_1's and lab_2's blocks with its own b_0_0; its own b_0_1
    also fits the pooled job but runs its job j_0_0 and opens the round after a two-round consent
    window closes, so a proposal committing it holds it unallocated until then (b_2_0 opens in round
    3: only a two-round window can pool it)."""
    blocks = [block("b_0_0", "lab_0", gpus=4, start=5, duration=2), block("b_0_1", "lab_0", gpus=4, start=3, duration=1),
              block("b_1_0", "lab_1", gpus=4, start=5, duration=2), block("b_2_0", "lab_2", gpus=4, start=3, duration=2)]
    jobs = [job("j_0_p", "lab_0", hours=24, deadline=8, value=120.0, min_rel=0.8, pooled=True),
            job("j_0_0", "lab_0", hours=4, deadline=4, value=30.0),
            job("j_1_0", "lab_1", hours=2, deadline=9, value=5.0), job("j_2_0", "lab_2", hours=1, deadline=3, value=4.0)]
    return make_world(blocks, jobs, n_labs=3, rounds=8, task="coalition_market", budget=80.0)


def test_rule_expert_does_not_hold_a_block_its_other_job_needs_when_the_pool_completes_without_it():
    # decision 0016, third round: a held block that idles if the proposal fails costs its other job;
    # the pool can do without b_0_1, so the proposal leaves it to j_0_0
    w = idle_risk_world()
    view = observe(w, "lab_0")
    b01 = next(b for b in view.owned_blocks if b.block_id == "b_0_1")
    assert (b01.marginal_value or 0.0) > 10 and b01.best_job == "j_0_0"
    me = RuleExpertPolicy(seed=0)
    proposal = me.act(view)
    assert proposal.action_type == "form_coalition" and proposal.job_id == "j_0_p"
    # both pools need both members; the one without b_0_1 risks nothing of j_0_0
    assert proposal.block_ids == ("b_0_0",) and set(proposal.requested_block_ids) == {"b_1_0", "b_2_0"}
    pooled_job = next(j for j in view.private_jobs if j.job_id == "j_0_p")
    assert RuleExpertPolicy.idles_on_failure(b01, pooled_job, settle_by=view.round_index + 2)
    assert not RuleExpertPolicy.idles_on_failure(b01, pooled_job, settle_by=view.round_index + 1)
    # played out, the seat allocates b_0_1 to j_0_0 before it opens whatever the members do
    ep = run(idle_risk_world(), {"lab_0": RuleExpertPolicy(seed=0)})
    assert ep.world.blocks["b_0_1"].job_id == "j_0_0"


def test_rule_expert_short_names_no_blocks_without_a_job_and_otherwise_plays_rule_expert():
    """The short-form teacher (decision 0040): where rule_expert allocates named blocks without a job,
    it writes allocate_to_job() (the whole best plan), unless the plan runs a block promised to a
    coalition still gathering consents (decision 0042: the whole plan would break it); every other
    move of the episode up to there is rule_expert's."""
    from gpu_arena.core.types import Action
    from gpu_arena.policies.expert import planned_blocks, promised_blocks

    rewritten = kept_named = 0
    for seed in range(12):
        world = generate_world("coalition_market", "train", seed)
        ep = Episode(world, controlled=("lab_0",))
        short, plain = make_policy("rule_expert_short", seed=seed), make_policy("rule_expert", seed=seed)
        diverged = False
        while not ep.done:
            view = seat_view(short, ep, "lab_0")
            a = short.act(view)
            planned = planned_blocks(view)
            held = bool(planned & promised_blocks(view))
            if a.action_type == "allocate_to_job" and not a.job_id:
                assert bool(a.block_ids) == held  # named exactly where the whole plan would break a coalition
                kept_named += held
            if not diverged:
                b = plain.act(seat_view(plain, ep, "lab_0"))
                if a != b:
                    assert b.action_type == "allocate_to_job" and b.block_ids and not b.job_id and not held
                    assert a == Action("allocate_to_job")
                    rewritten += 1
                    diverged = True  # the states differ from here on
            ep.step({"lab_0": a})
    assert rewritten >= 2 and kept_named >= 1
