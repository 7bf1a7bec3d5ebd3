"""Behaviour tests for the opponent archetypes and baselines, on small hand-built worlds."""

from __future__ import annotations

import pytest

from gpu_arena.core.engine import Episode
from gpu_arena.env import GpuArenaEnv
from gpu_arena.policies import ARCHETYPES, BASELINES, make_policy, policy_names
from gpu_arena.policies.negotiator import Negotiator
from gpu_arena.rollout import play_seat
from helpers import act, block, job, make_world


def seller_world():
    """lab_1 owns b_1_0, which its job j_1_0 needs (worth 30 to it); lab_0 needs it more."""
    return make_world(
        [block("b_1_0", "lab_1", gpus=4, start=4, duration=2), block("b_1_1", "lab_1", gpus=2, start=4, duration=1),
         block("b_0_0", "lab_0", gpus=1, start=5, duration=1)],
        [job("j_1_0", "lab_1", hours=8, deadline=8, value=30.0), job("j_0_0", "lab_0", hours=8, deadline=8, value=60.0)],
        rounds=6)


def answer(policy_name: str, offer_action, world=None, **params):
    """lab_0 makes an offer in round 0; lab_1's policy answers it in round 1."""
    w = world or seller_world()
    ep = Episode(w, controlled=())
    ep.step({"lab_0": offer_action})
    assert ep.last_results["lab_0"].ok, ep.last_results["lab_0"]
    pol = make_policy(policy_name, seed=1, **params)
    return pol.act(ep.observe("lab_1")), ep


def test_registry_has_every_archetype_and_baseline():
    assert set(ARCHETYPES) | set(BASELINES) <= set(policy_names())
    for name in policy_names():
        assert hasattr(make_policy(name, seed=0, acceptance_margin=0.1, risk=0.5), "act")


def test_cooperative_accepts_a_fair_pareto_improving_offer():
    # b_1_1 is worth nothing to lab_1: any payment is a gain for it
    action, _ = answer("cooperative", act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_1"], payment=2.0))
    assert action.action_type == "accept_offer"


def test_selfish_rejects_a_low_margin_offer_that_cooperative_takes():
    # b_1_0 is worth 30 (minus energy) to lab_1; 31 leaves it a thin margin
    offer = act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=31.0)
    coop, _ = answer("cooperative", offer, acceptance_margin=0.1)
    selfish, _ = answer("selfish", offer, acceptance_margin=0.1)
    assert coop.action_type == "accept_offer"
    assert selfish.action_type in ("reject_offer", "counter_offer")


def test_deadline_panicked_pays_more_as_its_deadline_nears():
    def bid_at(round_index: int) -> float:
        w = make_world([block("b_1_0", "lab_1", gpus=4, start=9, duration=2), block("b_1_9", "lab_1", gpus=1, start=9)],
                       [job("j_0_0", "lab_0", hours=8, deadline=11, value=60.0)], rounds=12)
        w.round_index = round_index
        pol = make_policy("deadline_panicked", seed=0, deadline_sensitivity=1.0, risk=0.3)
        from gpu_arena.core.observe import observe

        action = pol.act(observe(w, "lab_0"))
        assert action.action_type == "send_offer" and action.requested_block_ids == ("b_1_0",)
        return float(action.payment)

    early, late = bid_at(0), bid_at(8)
    assert late > early


def test_retaliatory_refuses_a_lab_that_exploited_it():
    w = seller_world()
    ep = Episode(w, controlled=())
    pol = make_policy("retaliatory", seed=1, retaliation_memory=4)
    # an insulting offer: b_1_0 (worth ~30 to lab_1) for a cent
    ep.step({"lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=0.01)})
    first = pol.act(ep.observe("lab_1"))
    assert first.action_type in ("reject_offer", "counter_offer")
    ep.step({"lab_1": first, "lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_1"], payment=3.0)})
    second = pol.act(ep.observe("lab_1"))
    assert second.action_type == "reject_offer"  # a good offer, refused: the grudge holds
    coop = make_policy("cooperative", seed=1)
    assert coop.act(ep.observe("lab_1")).action_type == "accept_offer"


def test_retaliatory_refuses_a_lab_that_breached():
    w = seller_world()
    ep = Episode(w, controlled=())
    from gpu_arena.core.types import Event

    w.events.append(Event(0, "breach", "lab_0 withdrew block b_0_0 from coalition c_1", {"lab": "lab_0"}))
    ep.step({"lab_0": act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_1"], payment=5.0)})
    pol = make_policy("retaliatory", seed=1)
    assert pol.act(ep.observe("lab_1")).action_type == "reject_offer"


def test_deceptive_misreports_but_never_breaks_a_rule():
    lies = 0
    for seed in range(12):
        env = GpuArenaEnv(task="coalition_market", split="train", opponents="deceptive")
        obs = env.reset(seed=seed)
        while not obs.done:
            obs = env.step(make_policy("no_negotiation").act(obs))
        ep = env.episode
        assert ep is not None
        for lid, lab in ep.world.labs.items():
            if lid != "lab_0":
                assert lab.invalid_actions == 0, (seed, lid)  # conflicts aside, every action was legal
        for m in ep.world.messages:
            if m.sender != "lab_0" and "GPU-hours" in m.text:
                truth = sum(j.gpu_hours_required for j in ep.world.jobs.values() if j.owner == m.sender)
                if str(truth) not in m.text:
                    lies += 1
    assert lies > 0


@pytest.mark.parametrize("name", [*sorted(ARCHETYPES), "rule_expert", "greedy_hoarder", "always_accept", "oracle"])
def test_every_scripted_policy_plays_whole_episodes_legally(name):
    for task in ("single_trade", "market_round", "coalition_market"):
        for seed in range(3):
            env = GpuArenaEnv(task=task, split="holdout", opponents=name)
            obs = env.reset(seed=seed)
            pol = make_policy(name, seed=seed)
            play_seat(env, pol, obs)
            for lab in env.episode.world.labs.values():
                assert lab.invalid_actions <= 1, (task, seed, lab.lab_id)


def test_negotiator_threshold_melts_with_urgency():
    pol = Negotiator(acceptance_margin=0.2, deadline_sensitivity=2.0)
    w = make_world([block("b_0_0", "lab_0", start=9)], [job("j_0_0", "lab_0", deadline=10)], rounds=12)
    from gpu_arena.core.observe import observe

    calm = pol.threshold(observe(w, "lab_0"), 30.0)
    w.round_index = 8
    assert pol.threshold(observe(w, "lab_0"), 30.0) < calm


def test_a_counter_moves_the_money_the_right_way():
    # a low bid for a block lab_1 uses: the counter asks lab_0 for more, never less than the bid
    bid = act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_0"], payment=5.0)
    counter, _ = answer("selfish", bid, acceptance_margin=0.2)
    assert counter.action_type == "counter_offer"
    assert counter.block_ids == ("b_1_0",) and counter.requested_payment > 30.0 and not counter.payment
    # lab_0 sells lab_1 a block for more than it is worth to lab_1: the counter offers to pay less
    # (it never asks the seller to pay on top of handing over its block)
    w = seller_world()
    w.jobs["j_1_1"] = job("j_1_1", "lab_1", hours=3, deadline=8, value=6.0)  # b_1_1 and b_0_0 complete it
    sell = act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0"], requested_payment=20.0)
    counter, _ = answer("selfish", sell, world=w, acceptance_margin=0.2)
    assert counter.action_type == "counter_offer"
    assert counter.requested_block_ids == ("b_0_0",) and not counter.requested_payment
    assert 0 < counter.payment < 20.0
    # a block worth nothing to lab_1 is not worth taking even for free: no counter asks to be paid for it
    free = act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0"], requested_payment=1.0)
    answer_, _ = answer("selfish", free, acceptance_margin=0.2)
    assert answer_.action_type == "reject_offer"


def test_no_archetype_accepts_an_offer_its_sender_can_no_longer_pay():
    # the sender's budget (public) fell below its payment after it sent the offer: the offer cannot
    # settle, and accepting it would waste the round (every round, until it expires)
    offer = act("send_offer", target_lab_id="lab_1", requested_block_ids=["b_1_1"], payment=2.0)
    for name in ("cooperative", "selfish", "deadline_panicked", "retaliatory"):
        action, ep = answer(name, offer)
        assert action.action_type == "accept_offer"
        ep.world.labs["lab_0"].budget = 1.0
        ep.world.version += 1  # views are cached per world version
        pol = make_policy(name, seed=1)
        assert pol.act(ep.observe("lab_1")).action_type != "accept_offer", name


def test_no_archetype_accepts_an_offer_whose_price_it_cannot_pay():
    # lab_0 sells lab_1 a block that completes lab_1's small job, for 1.0; lab_1 has only 0.5 left:
    # accepting cannot settle, a counter paying what it has may
    w = seller_world()
    w.jobs["j_1_1"] = job("j_1_1", "lab_1", hours=3, deadline=8, value=6.0)  # b_1_1 and b_0_0 complete it
    sell = act("send_offer", target_lab_id="lab_1", block_ids=["b_0_0"], requested_payment=1.0)
    action, ep = answer("cooperative", sell, world=w)
    assert action.action_type == "accept_offer"
    ep.world.labs["lab_1"].budget = 0.5
    ep.world.version += 1
    action = make_policy("cooperative", seed=1).act(ep.observe("lab_1"))
    assert action.action_type != "accept_offer"
    if action.action_type == "counter_offer":
        assert (action.payment or 0.0) <= 0.5 and not action.requested_payment


def pool_offer_world(energy: float):
    """lab_0 proposes to pool lab_1's b_1_0 (8 GPU-hours at ``energy`` a GPU-hour, idle for lab_1's own job)."""
    blocks = [block("b_0_0", "lab_0", gpus=4, start=5, duration=2),
              block("b_1_0", "lab_1", gpus=4, start=5, duration=2, energy=energy)]
    jobs = [job("j_0_p", "lab_0", hours=16, deadline=8, value=100.0, min_rel=0.8, pooled=True),
            job("j_1_0", "lab_1", hours=2, deadline=3, value=5.0)]
    w = make_world(blocks, jobs, n_labs=2, rounds=8, task="coalition_market")
    ep = Episode(w, controlled=())
    ep.step({"lab_0": act("form_coalition", job_id="j_0_p", member_lab_ids=["lab_1"], block_ids=["b_0_0"],
                          requested_block_ids=["b_1_0"], payment=3.0, shares={"lab_0": 0.9, "lab_1": 0.1})})
    assert ep.last_results["lab_0"].ok, ep.last_results["lab_0"]
    return ep


def test_a_member_counts_the_energy_its_pooled_blocks_will_burn():
    # the block is worth nothing to lab_1's own job, so only the energy it pays to run it in the
    # pool weighs against the payment and the expected share
    cheap = make_policy("cooperative", seed=1).act(pool_offer_world(energy=0.1).observe("lab_1"))
    assert cheap.action_type == "commit_to_coalition"
    dear = make_policy("cooperative", seed=1).act(pool_offer_world(energy=3.0).observe("lab_1"))
    assert dear.action_type != "commit_to_coalition"
