"""The rule judge for contested resources (docs/design.md, judge mode).

A pitch is scored against the server's truth, never against its rhetoric:

* **urgency** (truth only): how much the contested block is worth to the pitching lab's jobs (its
  marginal value under the grader's valuation), relative to the most it could be worth.
* **evidence** (claims checked): numbers the pitch states about its own job (GPU-hours needed,
  deadline round) are compared with that job. A true, specific claim earns credit; any false
  claim turns evidence negative; no claim earns nothing. Words alone ("urgent", "critical")
  carry no evidence, so keyword stuffing earns nothing.
* **fairness**: the lab's public reputation, less a share if it already won a contested resource.

score = 0.45 · urgency + 0.4 · evidence + 0.15 · fairness. The best score wins (ties: higher bid,
then lab id) and pays its bid. The effect on the winner's reward is the change of its potential,
booked to ``judge_argument_score``, so it is bounded like every other potential change.

**A model judge** (any object with the :class:`PitchJudge` protocol, such as
``gpu_arena.llm.judge.LLMJudge``) may add its opinion of the pitches' arguments. It reads only
public facts (:class:`AuctionCase`: the block, the bids, the messages, the reputations) and
returns a score in [0, 1] per pitch. The rules above still apply in full; the model's score m
moves a pitch by ``MODEL_BOUND · (2m − 1)``, at most ±0.1, and only downwards for a pitch with no
verified claim (a false claim, or none): the model can demote rhetoric, never promote what the
server could not check. So with any model output a false claim still scores below no claim,
keyword stuffing still earns nothing, and a true specific claim still beats no claim. A model
that fails or answers out of contract (an exception, a lab missing, a score outside [0, 1]) is
not used for that auction: the rule judge decides alone and every pitch's reasons say why.
What the model said is recorded (:func:`judge_pitches` fills ``records``; the engine puts them
in the transcript), and :class:`RecordedJudge` plays it back, so replays stay exact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .types import Auction, AuctionStatus, Job, JobStatus, Pitch, World
from .valuation import LabValuer, valid_hours

HOURS_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:gpu[-\s]?hours?|gpu[-\s]?h\b|hours?\b)", re.IGNORECASE)
DEADLINE_RE = re.compile(r"(?:by|before|until|deadline(?:\s+is)?(?:\s+at)?)\s+round\s+(\d+)", re.IGNORECASE)
W_URGENCY, W_EVIDENCE, W_FAIRNESS = 0.45, 0.4, 0.15
# the most a model judge can move a pitch's score. It can lift only pitches with a verified claim
# and lower any, so it can never undo an order the truth checks set between evidence levels (a
# single verified claim is worth W_EVIDENCE · 0.5 = 0.2 over none, a false claim 0.4 under none)
MODEL_BOUND = 0.1
MAX_REASON_CHARS = 200
assert MODEL_BOUND < W_EVIDENCE * 0.5


@dataclass(slots=True)
class JudgeScore:
    lab_id: str
    score: float
    urgency: float
    evidence: float
    fairness: float
    reasons: list[str] = field(default_factory=list)
    model: float | None = None  # a model judge's score in [0, 1], when one was used
    adjustment: float = 0.0  # what the model's score added (bounded by MODEL_BOUND)


def _pitch_job(world: World, pitch: Pitch) -> Job | None:
    if pitch.job_id is not None:
        job = world.jobs.get(pitch.job_id)
        if job is not None and job.owner == pitch.lab_id and job.status == JobStatus.OPEN:
            return job
    open_jobs = [j for j in world.jobs.values() if j.owner == pitch.lab_id and j.status == JobStatus.OPEN]
    return min(open_jobs, key=lambda j: (j.deadline_round, j.job_id)) if open_jobs else None


def check_claims(world: World, pitch: Pitch) -> tuple[float, list[str]]:
    """Evidence in [-1, 1] from the numeric claims of a pitch about its own job."""
    job = _pitch_job(world, pitch)
    hours = [float(x) for x in HOURS_RE.findall(pitch.message)]
    deadlines = [int(x) for x in DEADLINE_RE.findall(pitch.message)]
    if not hours and not deadlines:
        return 0.0, ["no checkable claim"]
    if job is None:
        return -1.0, ["claims about a job it does not have"]
    reasons: list[str] = []
    true_hours = {float(job.gpu_hours_required), float(job.gpu_hours_required - valid_hours(world, job))}
    verified = 0
    for h in hours:
        if h in true_hours:
            verified += 1
            reasons.append(f"{h:g} GPU-hours: true")
        else:
            reasons.append(f"{h:g} GPU-hours: false (needs {job.gpu_hours_required})")
            return -1.0, reasons
    for d in deadlines:
        if d == job.deadline_round:
            verified += 1
            reasons.append(f"deadline round {d}: true")
        else:
            reasons.append(f"deadline round {d}: false (round {job.deadline_round})")
            return -1.0, reasons
    return min(1.0, 0.5 * verified), reasons


def rule_scores(world: World, auction: Auction) -> dict[str, JudgeScore]:
    """Score every pitch of an auction against the server's truth (the rule judge alone)."""
    block = world.blocks[auction.block_id]
    ceiling = max(1e-9, block.hours * world.params.value_per_hour_cap)
    wins = {a.winner for a in world.auctions.values() if a.status == AuctionStatus.AWARDED and a.winner}
    scores: dict[str, JudgeScore] = {}
    for lab_id, pitch in auction.pitches.items():
        valuer = LabValuer(world, lab_id)
        marginal = max(0.0, valuer.net(extra=(block,)) - valuer.net())
        urgency = min(1.0, marginal / ceiling)
        evidence, reasons = check_claims(world, pitch)
        fairness = world.labs[lab_id].reputation - (0.3 if lab_id in wins else 0.0)
        reasons = [f"urgency {urgency:.2f} (the block's value to its jobs)", *reasons,
                   f"fairness {fairness:.2f} (reputation{', already won a resource' if lab_id in wins else ''})"]
        score = W_URGENCY * urgency + W_EVIDENCE * evidence + W_FAIRNESS * fairness
        scores[lab_id] = JudgeScore(lab_id, score, urgency, evidence, fairness, reasons)
    return scores


# ---------------------------------------------------------------------- model judges


@dataclass(frozen=True, slots=True)
class PitchCase:
    """One pitch as a model judge sees it: public facts only (pitches are broadcast messages)."""

    lab_id: str
    bid: float
    message: str
    reputation: float
    counter_to: str | None = None


@dataclass(frozen=True, slots=True)
class AuctionCase:
    """What a model judge is shown about one contested resource: the block and the pitches.

    Nothing private: no job, value or need of any lab (the rules check those against the truth).
    """

    task: str
    round_index: int
    auction_id: str
    block_id: str
    gpu_count: int
    start_round: int
    end_round: int
    reliability: float
    energy_cost: float
    pitches: tuple[PitchCase, ...]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A model judge's answer: ``scores`` maps every pitching lab to a number in [0, 1] (higher:
    a better argument); ``reasons`` (optional) one short explanation per lab."""

    scores: Mapping[str, float]
    reasons: Mapping[str, str] = field(default_factory=dict)


class JudgeError(Exception):
    """A model judge could not give a verdict (unreachable, malformed answer); ``reason`` is recorded."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@runtime_checkable
class PitchJudge(Protocol):
    """A judge of pitch arguments (an LLM, a person, a scripted stand-in).

    Contract: ``judge(case)`` returns a :class:`Verdict` with a score in [0, 1] for every lab in
    ``case.pitches``, or raises (preferably :class:`JudgeError` with a reason). It may be slow and
    may fail; it must not see or need private values. ``name`` identifies it in records.
    """

    name: str

    def judge(self, case: AuctionCase) -> Verdict: ...


def auction_case(world: World, auction: Auction) -> AuctionCase:
    """The public facts of an auction, for a model judge."""
    b = world.blocks[auction.block_id]
    pitches = tuple(PitchCase(p.lab_id, p.bid, p.message, round(world.labs[p.lab_id].reputation, 6), p.counter_to)
                    for p in auction.pitches.values())
    return AuctionCase(world.task, world.round_index, auction.auction_id, b.block_id, b.gpu_count, b.start_round,
                       b.start_round + b.duration, b.reliability, b.energy_cost, pitches)


def verdict_problem(case: AuctionCase, verdict: object) -> str | None:
    """Why ``verdict`` breaks the :class:`PitchJudge` contract for ``case`` (None: it keeps it)."""
    scores = getattr(verdict, "scores", None)
    if not isinstance(verdict, Verdict) or not isinstance(scores, Mapping):
        return f"not a Verdict: {type(verdict).__name__}"
    for p in case.pitches:
        if p.lab_id not in scores:
            return f"no score for {p.lab_id}"
        s = scores[p.lab_id]
        if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s) or not 0.0 <= s <= 1.0:
            return f"score for {p.lab_id} is not a number in [0, 1]: {str(s)[:40]!r}"
    return None


def _failure_reason(e: BaseException) -> str:
    text = e.reason if isinstance(e, JudgeError) else f"{type(e).__name__}: {e}"
    return text[:300]


def judge_name(judge: object) -> str:
    return str(getattr(judge, "name", type(judge).__name__))


def judge_pitches(world: World, auction: Auction, judge: PitchJudge | None = None,
                  records: dict[str, dict[str, Any]] | None = None) -> dict[str, JudgeScore]:
    """Score every pitch of an auction against the server's truth; with a model ``judge``, add its
    bounded opinion (see the module docstring) and record what it said in ``records``."""
    scores = rule_scores(world, auction)
    if judge is None or not scores:
        return scores
    name = judge_name(judge)
    case = auction_case(world, auction)
    try:
        verdict = judge.judge(case)
        problem = verdict_problem(case, verdict)
        if problem is not None:
            raise JudgeError(f"answer out of contract: {problem}")
    except Exception as e:  # any failure of the model judge leaves the decision to the rules
        reason = _failure_reason(e)
        if records is not None:
            records[auction.auction_id] = {"judge": name, "fallback": reason}
        for sc in scores.values():
            sc.reasons.append(f"judge {name} not used ({reason}): rule judge only")
        return scores
    given = verdict.reasons if isinstance(verdict.reasons, Mapping) else {}  # reasons are optional
    model_reasons = {lab: str(given.get(lab, ""))[:MAX_REASON_CHARS] for lab in scores}
    if records is not None:
        records[auction.auction_id] = {"judge": name, "scores": {lab: float(verdict.scores[lab]) for lab in scores},
                                       "reasons": model_reasons}
    for lab, sc in scores.items():
        m = float(verdict.scores[lab])
        adjustment = MODEL_BOUND * (2.0 * m - 1.0)
        note = ""
        if adjustment > 0 and sc.evidence <= 0:
            adjustment = 0.0
            note = " (no verified claim: the model can only lower it)"
        sc.model, sc.adjustment = m, adjustment
        sc.score += adjustment
        said = f": {model_reasons[lab]}" if model_reasons[lab] else ""
        sc.reasons.append(f"judge {name} {10 * m:.1f}/10, {adjustment:+.3f}{note}{said}")
    return scores


class RecordedJudge:
    """Plays back the verdicts a model judge gave in an earlier run of the same episode (from the
    transcript's ``judge`` entries), so that a replay reproduces it exactly without the model."""

    def __init__(self, records: Mapping[str, Mapping[str, Any]]) -> None:
        self.records = {k: dict(v) for k, v in records.items()}
        names = {str(r.get("judge")) for r in self.records.values()}
        self.name = names.pop() if len(names) == 1 else "recorded"

    def judge(self, case: AuctionCase) -> Verdict:
        rec = self.records.get(case.auction_id)
        if rec is None:
            raise JudgeError(f"no recorded verdict for {case.auction_id}")
        if "fallback" in rec:
            raise JudgeError(str(rec["fallback"]))
        return Verdict(dict(rec.get("scores", {})), dict(rec.get("reasons", {})))


def recorded_judge(transcript: list[dict[str, Any]]) -> RecordedJudge | None:
    """The recorded model judge of an episode's transcript, if a model judged any pitch in it."""
    records = {aid: rec for rnd in transcript for aid, rec in (rnd.get("judge") or {}).items()}
    return RecordedJudge(records) if records else None
