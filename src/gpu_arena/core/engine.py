"""The multi-seat episode: simultaneous rounds, the clock, and the potential-based reward ledger.

Reward (docs/design.md). Each lab has a potential Φ = budget + realised value + the best value it can
still reach with what it holds (its optimal allocation) − the energy that plan would pay + its
shares in formed coalitions. Every step pays ΔΦ / scale, split by cause into the seven component
columns, plus small bounded penalties. Φ at reset is the lab's no-trade baseline (BATNA) and Φ at
the end is its realised utility plus its initial budget, so the sum of an episode's rewards is
exactly (utility − BATNA) / scale + penalties. Nothing is paid for merely making offers or
proposing coalitions: such shaping would not telescope and could be farmed.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .allocation import FrontierCache
from .observe import ViewCache, WorldIndex, observe
from .records import (
    CONFLICT_CODES,
    action_record,
    action_to_dict,
    budget_token,
    message_text,
    referenced_ids,
    standard_record,
)
from .rules import (
    CATEGORY_COLUMNS,
    REP_INVALID,
    REP_SPAM,
    ActionError,
    apply_action,
    expire,
    final_settlement,
    resolve_auctions,
    settle_due_jobs,
    start_blocks,
)
from .shocks import fire_due_shocks
from .sums import ordered_sum
from .types import (
    COMPONENT_COLUMNS,
    PENALTY_COLUMNS,
    REWARD_COLUMNS,
    Action,
    ActionResult,
    AuctionStatus,
    RejectedAction,
    World,
)
from .valuation import LabValuer, parts_of, potential_parts
from .views import EMPTY, ResultView, SeatView
from .welfare import social_optimum
from .worldgen import generate_world

if TYPE_CHECKING:
    from .judge import PitchJudge

PENALTY_INVALID = 0.01
PENALTY_SPAM = 0.005
PENALTY_BREACH = 0.02
SPAM_CAP = 0.03
BREACH_CAP = 0.06
PENALTY_BOUND = PENALTY_INVALID + SPAM_CAP + BREACH_CAP
# with |ΔΦ|/scale ≤ 0.9 (decision 0001) a step stays in [−1, 1] only if penalties stay within 0.1
assert PENALTY_BOUND <= 0.1

WAIT = Action("wait")
_LEDGER_COLUMNS = (*COMPONENT_COLUMNS, *PENALTY_COLUMNS)


class EpisodeOver(Exception):
    """Raised by :meth:`Episode.step` after the episode has ended."""


@dataclass(slots=True)
class RoundReport:
    """What one round did: per-lab reward columns and action results, and whether it ended."""

    round_index: int
    order: list[str]
    results: dict[str, ActionResult]
    rewards: dict[str, dict[str, float]]
    done: bool


@dataclass(slots=True)
class EpisodeSnapshot:
    world: World
    phi: dict[str, tuple[float, float]]
    returns: dict[str, float]
    transcript: list[dict[str, Any]]
    last_results: dict[str, ActionResult]
    last_rewards: dict[str, dict[str, float]]
    penalties: dict[str, float] = field(default_factory=dict)


class Episode:
    """One episode of the GPU economy with any number of seats.

    Contract:
        * ``step(actions)`` takes at most one :class:`Action` per lab (missing seats wait), resolves
          them in an order drawn from the episode RNG, then advances the clock one round.
        * Deterministic: the same ``(task, split, seed)`` and the same actions give the same
          transcript, rewards and final world.
        * An invalid action raises nothing: it yields an error result with a stable ``code``, a
          bounded penalty, and is otherwise a wait; the world is untouched by it.
        * The episode ends after ``max_rounds`` rounds or once every seat in ``controlled`` has
          called ``finish``; the end settles everything. ``step`` after the end raises
          :class:`EpisodeOver`.
        * ``snapshot``/``restore``/``fork`` copy the whole episode, RNG included.
        * In judge mode a model ``judge`` (a :class:`~gpu_arena.core.judge.PitchJudge`) may add its
          bounded opinion to the rule judge's; what it said goes into the transcript (``judge``
          key of the round), so :func:`~gpu_arena.core.judge.recorded_judge` replays it exactly.
          Forks share the judge object.

    Args:
        world: a generated world (see :func:`gpu_arena.core.worldgen.generate_world`).
        controlled: seats whose ``finish`` ends the episode early (the externally driven ones).
        strict: recompute every lab's Φ at every ledger mark (slow; tests use it to check that
            the incremental ledger attributes changes to the right columns).
        judge: a model judge for judge mode (None: the rule judge alone).
    """

    def __init__(self, world: World, controlled: Sequence[str] = ("lab_0",), *, strict: bool = False,
                 judge: PitchJudge | None = None) -> None:
        for lid in controlled:
            if lid not in world.labs:
                raise ValueError(f"unknown seat {lid!r}; this world has {', '.join(world.labs)}")
        self.world = world
        self.controlled = tuple(controlled)
        self.strict = strict
        self.judge = judge
        self._judge_records: dict[str, dict[str, Any]] = {}
        self.phi: dict[str, tuple[float, float]] = {lid: potential_parts(world, lid) for lid in world.labs}
        self.returns: dict[str, float] = dict.fromkeys(world.labs, 0.0)
        self.penalties: dict[str, float] = dict.fromkeys(world.labs, 0.0)
        self.transcript: list[dict[str, Any]] = []
        self.last_results: dict[str, ActionResult] = {}
        self.last_rewards: dict[str, dict[str, float]] = {lid: dict.fromkeys(REWARD_COLUMNS, 0.0) for lid in world.labs}
        self._ledger: dict[str, dict[str, float]] = {}
        self._valuers: dict[str, tuple[int, LabValuer]] = {}
        self._index: tuple[int, WorldIndex] | None = None  # the views' shared index of the current state
        self._views: dict[tuple[str, bool, bool], tuple[int, World, SeatView]] = {}  # (seat, aids, lazy) -> view
        self._view_cache = ViewCache()  # views of world facts, kept while their fields stay the same
        self._frontiers = FrontierCache()  # this episode's solved allocation frontiers

    @classmethod
    def from_snapshot(cls, snap: EpisodeSnapshot, controlled: Sequence[str] = ("lab_0",), *, strict: bool = False,
                      judge: PitchJudge | None = None) -> Episode:
        """An episode standing where ``snap`` was taken (a copy: the snapshot stays usable), with
        its own caches; the potentials come from the snapshot, not recomputed."""
        episode = cls.__new__(cls)
        episode.controlled, episode.strict, episode.judge = tuple(controlled), strict, judge
        episode._judge_records, episode._ledger, episode._valuers, episode._views = {}, {}, {}, {}
        episode._view_cache = ViewCache()
        episode._frontiers = FrontierCache()
        episode.restore(snap)
        return episode

    @classmethod
    def new(cls, task: str, split: str = "train", seed: int = 0, controlled: Sequence[str] = ("lab_0",),
            judge_mode: str = "none", strict: bool = False, judge: PitchJudge | None = None) -> Episode:
        return cls(generate_world(task, split, seed, judge_mode), controlled, strict=strict, judge=judge)

    @property
    def done(self) -> bool:
        return self.world.done

    # ------------------------------------------------------------------ stepping

    def valuer(self, lab_id: str) -> LabValuer:
        """The lab's valuer for the current world state (cached until the next event)."""
        hit = self._valuers.get(lab_id)
        if hit is not None and hit[0] == self.world.version:
            return hit[1]
        valuer = LabValuer(self.world, lab_id, frontiers=self._frontiers)
        self._valuers[lab_id] = (self.world.version, valuer)
        return valuer

    def _mark(self, category: str, labs: set[str] | Sequence[str]) -> None:
        if category not in CATEGORY_COLUMNS:
            self.world.version += 1
            return
        vcol, mcol = CATEGORY_COLUMNS[category]
        self.world.version += 1  # an event just happened: cached valuations are stale
        targets = self.world.labs if self.strict else labs
        for lid in targets:
            v, m = parts_of(self.world, lid, *self.valuer(lid).totals())
            pv, pm = self.phi[lid]
            led = self._ledger[lid]
            led[vcol] += v - pv
            led[mcol] += m - pm
            self.phi[lid] = (v, m)

    def step(self, actions: Mapping[str, Action | RejectedAction | None]) -> RoundReport:
        w = self.world
        if w.done:
            raise EpisodeOver("the episode is over; call reset for a new one")
        self._ledger = {lid: dict.fromkeys(_LEDGER_COLUMNS, 0.0) for lid in w.labs}
        order = list(w.labs)
        w.rng.shuffle(order)
        results: dict[str, ActionResult] = {}
        record_actions: dict[str, dict[str, Any]] = {}
        touched: set[str] = set()  # ids that successful moves of this round referenced
        overtaken: set[str] = set()  # seats whose move met a conflict (no penalty)
        labs = w.labs.values()
        for lid in order:
            action = actions.get(lid)
            if action is None:
                action = WAIT
            elif not isinstance(action, Action | RejectedAction):
                action = RejectedAction("malformed_action", f"cannot read an action from {type(action).__name__}")
            lab = w.labs[lid]
            if lab.finished and isinstance(action, Action) and isinstance(action.action_type, str) \
                    and action.action_type == "wait":
                results[lid] = ActionResult(True, "ok", "finished")
                continue
            lab.actions += 1
            led = self._ledger[lid]
            try:
                record = action_record(action) if isinstance(action, Action) else {}
                if isinstance(record, RejectedAction):  # a value the round cannot read: refused as unread
                    action = record
                if isinstance(action, RejectedAction):
                    record_actions[lid] = {"rejected": action.code, "message": action.message}
                    raise ActionError(action.code, action.message)
                assert isinstance(record, dict)
                record_actions[lid] = record
                budgets = [v.budget for v in labs]
                outcome = apply_action(w, lid, action)
            except ActionError as e:
                lab.last_signature = None
                if isinstance(action, Action) and e.code in CONFLICT_CODES and touched & referenced_ids(w, lid, action):
                    # moves are simultaneous: an action overtaken by an earlier move of this round
                    # (the block sold, the offer taken) is a conflict, not a mistake: no penalty
                    results[lid] = ActionResult(False, e.code, f"conflict with an earlier move this round: "
                                                               f"{message_text(e.message)}")
                    overtaken.add(lid)
                    continue
                results[lid] = ActionResult(False, e.code, message_text(e.message))
                lab.invalid_actions += 1
                lab.reputation = max(0.0, lab.reputation + REP_INVALID)
                led["invalid_action_penalty"] -= PENALTY_INVALID
                continue
            touched |= referenced_ids(w, lid, action)
            for (k, v), before in zip(w.labs.items(), budgets, strict=True):
                if v.budget != before:
                    touched.add(budget_token(k))
            results[lid] = ActionResult(True, "ok", outcome.note)
            self._spam_check(lid, action, record_actions[lid])
            if outcome.breaches:
                led["breach_penalty"] -= PENALTY_BREACH * outcome.breaches
            self._mark(outcome.category, outcome.affected)
        self._judge_records = {}
        self._tick()
        rewards = self._close_round()
        self.last_results = results
        self.last_rewards = rewards
        entry: dict[str, Any] = {
            "round": w.round_index - 1, "order": order,
            "actions": {lid: standard_record(r, results[lid], lid in overtaken) for lid, r in record_actions.items()},
            "results": {lid: [r.ok, r.code] for lid, r in sorted(results.items())},
            "rewards": {lid: round(r["normalized_reward"], 12) for lid, r in rewards.items()},
        }
        if self._judge_records:  # a model judge spoke: replays need its words
            entry["judge"] = self._judge_records
        self.transcript.append(entry)
        return RoundReport(w.round_index - 1, order, results, rewards, w.done)

    def _spam_check(self, lid: str, action: Action, record: dict[str, Any] | None = None) -> None:
        """``record``: ``action_to_dict(action)`` if the caller has it already."""
        lab = self.world.labs[lid]
        if action.action_type in ("wait", "finish"):
            lab.last_signature = None
            return
        # (field, repr) pairs in field order (fields are unique, so sorting the pairs sorts the fields)
        sig = tuple(sorted([(k, repr(v)) for k, v in (record if record is not None else action_to_dict(action)).items()]))
        if sig == lab.last_signature:
            self._ledger[lid]["spam_penalty"] -= PENALTY_SPAM
            lab.reputation = max(0.0, lab.reputation + REP_SPAM)
        else:
            lab.last_signature = sig

    def _tick(self) -> None:
        w = self.world
        w.round_index += 1
        # windows opening is the only effect of the clock itself on Φ, so it is marked first
        affected, lapsed, breaches = start_blocks(w)
        self._mark("time", affected)
        for lid, n in lapsed.items():
            self._ledger[lid]["spam_penalty"] -= PENALTY_SPAM * n
        for lid, n in breaches.items():
            self._ledger[lid]["breach_penalty"] -= PENALTY_BREACH * n
        expire(w)
        judge = getattr(self, "judge", None)  # episodes rebuilt with __new__ (env.restore) may lack it
        self._mark("judge", resolve_auctions(w, judge=judge, records=self._judge_records))
        self._mark("allocation", settle_due_jobs(w))
        self._mark("shock", fire_due_shocks(w))
        finished = bool(self.controlled) and all(w.labs[c].finished for c in self.controlled)
        if w.round_index >= w.max_rounds or finished:
            settled = final_settlement(w, judge=judge, records=self._judge_records)
            self._mark("allocation", settled)
            # the end is exact: every lab's Φ is re-read so the episode's sum telescopes (those the
            # settlement's mark just read are read already: nothing has changed since)
            self._mark("allocation", [lid for lid in w.labs if lid not in settled])

    def _close_round(self) -> dict[str, dict[str, float]]:
        rewards: dict[str, dict[str, float]] = {}
        for lid, led in self._ledger.items():
            scale = self.world.reward_scale[lid]
            row = {c: led[c] / scale for c in COMPONENT_COLUMNS}
            row["invalid_action_penalty"] = max(-PENALTY_INVALID, led["invalid_action_penalty"])
            row["spam_penalty"] = max(-SPAM_CAP, led["spam_penalty"])
            row["breach_penalty"] = max(-BREACH_CAP, led["breach_penalty"])
            total = math.fsum(row.values())
            row["normalized_reward"] = total
            self.returns[lid] += total
            self.penalties[lid] += row["invalid_action_penalty"] + row["spam_penalty"] + row["breach_penalty"]
            rewards[lid] = row
        return rewards

    # ------------------------------------------------------------------ views, copies, metrics

    def observe(self, lab_id: str, *, aids: bool = True, lazy: bool = False) -> SeatView:
        """``lab_id``'s view of the current state (see :func:`~gpu_arena.core.observe.observe` for
        ``aids`` and ``lazy``). Views are immutable values: a seat's view of one state is built
        once and shared by every reader."""
        w = self.world
        key = (lab_id, aids, lazy)
        hit = self._views.get(key)
        if hit is not None and hit[0] == w.version and hit[1] is w:
            return hit[2]
        res = self.last_results.get(lab_id)
        rv = ResultView(res.ok, res.code, res.message) if res else None
        row = self.last_rewards.get(lab_id, EMPTY)
        # every seat's view of one state shares one index; valuers built from it are cached like valuer()'s
        if self._index is None or self._index[0] != w.version or self._index[1].world is not w:
            self._index = (w.version, WorldIndex(w, self._view_cache, self._frontiers))
        index = self._index[1]
        vhit = self._valuers.get(lab_id)
        if vhit is None or vhit[0] != w.version:
            vhit = self._valuers[lab_id] = (w.version, index.valuer(lab_id))
        view = observe(w, lab_id, last_result=rv, reward=row.get("normalized_reward", 0.0),
                       reward_breakdown=row, aids=aids, lazy=lazy, valuer=vhit[1], index=index)
        self._views[key] = (w.version, w, view)
        return view

    def snapshot(self) -> EpisodeSnapshot:
        return copy.deepcopy(EpisodeSnapshot(self.world, self.phi, self.returns, self.transcript,
                                             self.last_results, self.last_rewards, self.penalties))

    def restore(self, snap: EpisodeSnapshot) -> None:
        s = copy.deepcopy(snap)
        self.world, self.phi, self.returns, self.transcript = s.world, s.phi, s.returns, s.transcript
        self.last_results, self.last_rewards, self.penalties = s.last_results, s.last_rewards, s.penalties
        self._valuers = {}
        self._views = {}
        self._index = None

    def fork(self) -> Episode:
        return Episode.from_snapshot(self.snapshot(), self.controlled, strict=self.strict, judge=self.judge)

    def potential(self, lab_id: str) -> float:
        v, m = self.phi[lab_id]
        return v + m

    def metrics(self, optimum: float | None = None) -> dict[str, Any]:
        """Episode metrics: welfare vs the exact optimum, surplus per lab, deal/breach/invalid rates, Gini.

        ``optimum`` may pass the ex-ante optimum if the caller has it (it costs an exact search).
        """
        w = self.world
        utilities = {lid: self.potential(lid) - lab.initial_budget for lid, lab in w.labs.items()}
        surplus = {lid: self.potential(lid) - w.initial_potential[lid] for lid in w.labs}
        # money that left the economy (auction prices) is welfare spent, not destroyed value
        paid_to_market = ordered_sum(a.price for a in w.auctions.values() if a.status == AuctionStatus.AWARDED)
        welfare = ordered_sum(utilities.values()) + paid_to_market
        if optimum is None:
            optimum = exante_optimum(w.task, w.split, w.seed)
        lab_metrics = {}
        for lid, lab in w.labs.items():
            lab_metrics[lid] = {
                "utility": utilities[lid], "surplus_over_batna": surplus[lid], "return": self.returns[lid],
                # share of the offers it made or received that settled
                "deal_rate": lab.deals / (lab.offers_made + lab.offers_received)
                if lab.offers_made + lab.offers_received else 0.0,
                "deals": lab.deals, "offers_made": lab.offers_made, "offers_received": lab.offers_received,
                "breach_rate": lab.breaches / lab.commitments if lab.commitments else 0.0,
                "invalid_rate": lab.invalid_actions / lab.actions if lab.actions else 0.0,
                "reputation": lab.reputation,
            }
        vals = sorted(utilities.values())
        n = len(vals)
        gini = 0.0
        if n and ordered_sum(vals) > 0:
            gini = ordered_sum((2 * i - n + 1) * v for i, v in enumerate(vals)) / (n * ordered_sum(vals))
        return {
            "task": w.task, "split": w.split, "seed": w.seed, "rounds": w.round_index, "done": w.done,
            # ex-ante optimum: shocks may move welfare past it
            "welfare": welfare, "optimum": optimum, "welfare_ratio": welfare / optimum if optimum > 0 else 0.0,
            "gini": gini, "labs": lab_metrics,
        }


@lru_cache(maxsize=4096)
def exante_optimum(task: str, split: str, seed: int) -> float:
    """The exact welfare optimum of the world as generated (before shocks and play).

    Every policy evaluated on the same seed is measured against the same number, which is what a
    comparison table needs; it is a pure function of (task, split, seed), hence the cache.
    """
    world = generate_world(task, split, seed)
    return social_optimum(list(world.blocks.values()), list(world.jobs.values()))


def world_fingerprint(world: World) -> str:
    """A digest of a world's blocks and jobs: keys caches of the (costly) exact optimum so that a
    change to world generation can never serve a stale number."""
    import hashlib
    import json

    data = [[(b.block_id, b.owner, b.gpu_count, b.start_round, b.duration, b.reliability, b.energy_cost)
             for b in world.blocks.values()],
            [(j.job_id, j.owner, j.gpu_hours_required, j.deadline_round, j.value, j.min_reliability, j.partial_credit)
             for j in world.jobs.values()]]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:24]
