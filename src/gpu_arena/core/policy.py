"""The Policy protocol and the simplest policies that fill seats not driven from outside.

A policy is anything with ``act(observation) -> action``. It receives only its own seat's view
(the core :class:`~gpu_arena.core.views.SeatView`, or the pydantic ``ArenaObservation`` with the
same field names) and returns a core :class:`Action` or any object with the same attributes
(such as ``gpu_arena.ArenaAction``). Policies that need randomness own a ``random.Random``
seeded by whoever builds them (the environment derives it from the episode seed).
"""

from __future__ import annotations

import random
from typing import Any, Protocol, runtime_checkable

from .serialize import coerce_action
from .sums import ordered_sum
from .types import PLANNABLE, Action, CoalitionStatus, JobStatus, RejectedAction, World


@runtime_checkable
class Policy(Protocol):
    """Chooses one action per round for one seat from that seat's own observation.

    Anything with ``act`` is a policy. The optional capabilities are declared by subclassing
    :class:`PolicyBase`, never found by probing attributes."""

    def act(self, observation: Any) -> Any: ...


@runtime_checkable
class Metered(Protocol):
    """Something that keeps a token and latency ledger (LLM agents and judges)."""

    def usage(self) -> dict[str, Any] | None: ...


class PolicyBase:
    """A policy's optional capabilities, with their defaults (the project's policies subclass it).

    - ``uses_aids``: it reads the view's decision aids (BATNA, what-if prices, best plan). False:
      it is shown the view without them, which saves their valuation.
    - ``needs_world``: it plans with the whole world (the oracle: a reference, not a fair player);
      :meth:`bind` hands it the world before each action.
    - :meth:`usage`: its token and latency ledger as a dict (LLM agents), None otherwise.
    """

    name: str  # the registry name, where the class sets one
    uses_aids: bool = True
    needs_world: bool = False

    def act(self, observation: Any) -> Any:
        raise NotImplementedError

    def bind(self, world: World) -> None:
        """Called with the world before each :meth:`act` when ``needs_world``."""

    def usage(self) -> dict[str, Any] | None:
        return None


def seat_view(policy: Any, episode: Any, seat: str) -> Any:
    """What ``policy`` observes in ``seat`` of ``episode`` (a core ``Episode``) now, by its declared
    capabilities (:class:`PolicyBase`): bound to the world first if it ``needs_world``, without the
    decision aids if it does not use them (its aids priced as it reads them if it does). A plain
    object with ``act`` sees the full view."""
    if isinstance(policy, PolicyBase):
        if policy.needs_world:
            policy.bind(episode.world)
        return episode.observe(seat, aids=policy.uses_aids, lazy=policy.uses_aids)
    return episode.observe(seat)


def policy_move(policy: Any, episode: Any, seat: str) -> Action | RejectedAction:
    """``policy``'s action for ``seat`` of ``episode`` now, on its own view (:func:`seat_view`), as
    the engine takes it. A policy may refuse its own output with a code of its own (an LLM's format
    error); one that raises loses its move (``policy_error``) and never the episode."""
    try:
        action = policy.act(seat_view(policy, episode, seat))
        return action if isinstance(action, RejectedAction) else coerce_action(action)
    except Exception as e:  # a broken seat must not crash the episode
        return RejectedAction("policy_error", f"{type(e).__name__}: {e}")


class WaitPolicy(PolicyBase):
    """Always waits. The passive reference: its seat keeps exactly what the clock leaves it."""

    name = "wait"
    uses_aids = False

    def act(self, observation: Any) -> Action:
        return Action("wait")


class NoNegotiationPolicy(PolicyBase):
    """Allocates its own blocks by its best plan and never trades: it realises its BATNA."""

    name = "no_negotiation"
    uses_aids = False

    def act(self, observation: Any) -> Action:
        if any(b.status in PLANNABLE for bs in [observation.owned_blocks] for b in bs
               if any(b.block_id in ids for ids in observation.best_plan.values())):
            return Action("allocate_to_job")  # no job, no blocks: apply the whole best plan
        return Action("wait")


class RandomPolicy(PolicyBase):
    """Uniformly random over action types, with arguments drawn from what the view shows.

    Most of its actions are legal; some are not (stale offers, unfit blocks), which is the point:
    it exercises the rules. ``invalid_rate`` adds deliberately malformed actions.
    """

    name = "random_valid"
    uses_aids = False  # it reads best_plan, never the what-if prices

    def __init__(self, seed: int = 0, invalid_rate: float = 0.0, risk: float = 0.3) -> None:
        self.rng = random.Random(seed)
        self.invalid_rate = invalid_rate
        self.risk = risk  # a world's opponent parameter: the share of its budget it may stake

    def act(self, observation: Any) -> Action:
        rng = self.rng
        me = observation.controlled_lab_id
        if self.invalid_rate and rng.random() < self.invalid_rate:
            return self._garbage(observation)
        others = [lab.lab_id for lab in observation.visible_labs if lab.lab_id != me and not lab.finished]
        mine = [b.block_id for b in observation.owned_blocks if b.tradeable]
        market = [b for b in observation.public_market.blocks if b.tradeable and b.owner in others]
        jobs = [j for j in observation.private_jobs if j.status == JobStatus.OPEN]
        incoming = [o for o in observation.active_offers if o.direction == "incoming"]
        budget = observation.controlled_lab_budget
        pending = [c for c in observation.active_coalitions if c.status == CoalitionStatus.PROPOSED and me not in c.consented]
        if pending and rng.random() < 0.5:
            return Action("commit_to_coalition", coalition_id=rng.choice(pending).coalition_id)
        kind = rng.choice((
            "send_offer", "send_offer", "accept_offer", "accept_offer", "reject_offer", "counter_offer",
            "make_pitch", "counter_pitch", "reserve_capacity", "release_capacity", "form_coalition",
            "commit_to_coalition", "allocate_to_job", "allocate_to_job", "send_message", "wait", "finish_rare"))
        if kind == "send_offer" and others:
            target = rng.choice(others)
            theirs = [b.block_id for b in market if b.owner == target]
            give = tuple(rng.sample(mine, k=min(len(mine), rng.randint(0, 1))))
            want = tuple(rng.sample(theirs, k=min(len(theirs), rng.randint(0, 2))))
            pay = round(rng.uniform(0, budget * self.risk), 2) if rng.random() < 0.5 else 0.0
            ask = 0.0 if pay else round(rng.uniform(0, 5), 2) * (rng.random() < 0.3)
            conds = {k: True for k in ("must_allocate_to_job", "no_resale", "coalition_only") if rng.random() < 0.1}
            return Action("send_offer", target_lab_id=target, block_ids=give, requested_block_ids=want,
                          payment=pay, requested_payment=ask, conditions=conds or None,
                          expires_in=rng.randint(1, 3), job_id=rng.choice(jobs).job_id if jobs and want else None)
        if kind in ("accept_offer", "reject_offer", "counter_offer") and incoming:
            o = rng.choice(incoming)
            if kind == "counter_offer":
                return Action("counter_offer", offer_id=o.offer_id, block_ids=tuple(o.requested_block_ids),
                              requested_block_ids=tuple(o.block_ids), payment=round(o.payment * 0.5, 2))
            job = rng.choice(jobs).job_id if jobs and kind == "accept_offer" and rng.random() < 0.5 else None
            return Action(kind, offer_id=o.offer_id, job_id=job)
        if kind in ("make_pitch", "counter_pitch") and observation.public_market.auctions:
            a = observation.public_market.auctions[0]
            rivals = [p for p in a.pitches if p.lab_id != me]
            if kind == "counter_pitch" and rivals:
                p = rng.choice(rivals)
                return Action("counter_pitch", target_lab_id=p.lab_id, payment=round(p.bid + 1.0, 2),
                              message="we need it more")
            return Action("make_pitch", payment=round(rng.uniform(0, budget * self.risk), 2),
                          job_id=jobs[0].job_id if jobs else None, message="urgent job")
        if kind == "reserve_capacity" and mine and jobs:
            return Action("reserve_capacity", block_ids=(rng.choice(mine),), job_id=rng.choice(jobs).job_id)
        if kind == "release_capacity":
            held = [b.block_id for b in observation.owned_blocks if b.status in ("reserved", "allocated", "committed")]
            if held:
                return Action("release_capacity", block_ids=(rng.choice(held),))
        if kind == "form_coalition":
            pooled = [j for j in jobs if j.pooled]
            if pooled and others:
                job = pooled[0]
                members = tuple(rng.sample(others, k=min(len(others), rng.randint(1, 2))))
                fits = [b for b in market if b.owner in members and b.end_round <= job.deadline_round
                        and b.reliability >= job.min_reliability]
                want = tuple(b.block_id for b in fits)[:4]
                shares = {m: round(1.0 / (len(members) + 1), 6) for m in members}
                shares[me] = 1.0 - ordered_sum(shares.values())
                return Action("form_coalition", job_id=job.job_id, member_lab_ids=members,
                              block_ids=tuple(mine[:1]), requested_block_ids=want, shares=shares)
        if kind == "commit_to_coalition":
            pending = [c for c in observation.active_coalitions if c.status == CoalitionStatus.PROPOSED and me not in c.consented]
            if pending:
                return Action("commit_to_coalition", coalition_id=rng.choice(pending).coalition_id)
        if kind == "allocate_to_job" and jobs:
            if observation.best_plan and rng.random() < 0.7:
                job_id, blocks = rng.choice(sorted(observation.best_plan.items()))
                return Action("allocate_to_job", job_id=job_id, block_ids=tuple(blocks))
            if mine:
                return Action("allocate_to_job", job_id=rng.choice(jobs).job_id, block_ids=(rng.choice(mine),))
        if kind == "send_message":
            return Action("send_message", target_lab_id=rng.choice(others) if others and rng.random() < 0.5 else None,
                          message=rng.choice(("hello", "need GPUs by round 5", "selling a block", "deal?")))
        if kind == "finish_rare" and rng.random() < 0.15:
            return Action("finish")
        return Action("wait")

    def _garbage(self, observation: Any) -> Action:
        rng = self.rng
        choice = rng.randrange(10)
        if choice == 0:
            return Action("launch_rockets")
        if choice == 1:
            return Action("send_offer", target_lab_id=observation.controlled_lab_id, payment=1.0)
        if choice == 2:
            return Action("send_offer", target_lab_id="lab_1", payment=float("nan"))
        if choice == 3:
            return Action("accept_offer", offer_id="o_999999")
        if choice == 4:
            return Action("allocate_to_job", job_id="j_9_9", block_ids=("b_0_0", "b_0_0"))
        if choice == 5:
            return Action("send_message", message="x" * 5000)
        if choice == 6:
            return Action("send_offer", target_lab_id="lab_1", payment=-5.0, block_ids=())
        if choice == 7:
            return Action("reserve_capacity", block_ids=tuple(f"b_{i}" for i in range(40)), job_id="j_0_0")
        if choice == 8:
            return Action("make_pitch", payment=float("inf"))
        return Action("send_offer", target_lab_id="lab_1", payment=1e12,
                      conditions={"bogus": True, "a": 1, "b": 2, "c": 3})
