"""The rule judge for contested resources (DESIGN §2, judge mode).

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .types import Auction, Job, Pitch, World
from .valuation import LabValuer, valid_hours

HOURS_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:gpu[-\s]?hours?|gpu[-\s]?h\b|hours?\b)", re.IGNORECASE)
DEADLINE_RE = re.compile(r"(?:by|before|until|deadline(?:\s+is)?(?:\s+at)?)\s+round\s+(\d+)", re.IGNORECASE)
W_URGENCY, W_EVIDENCE, W_FAIRNESS = 0.45, 0.4, 0.15


@dataclass(slots=True)
class JudgeScore:
    lab_id: str
    score: float
    urgency: float
    evidence: float
    fairness: float
    reasons: list[str] = field(default_factory=list)


def _pitch_job(world: World, pitch: Pitch) -> Job | None:
    if pitch.job_id is not None:
        job = world.jobs.get(pitch.job_id)
        if job is not None and job.owner == pitch.lab_id and job.status == "open":
            return job
    open_jobs = [j for j in world.jobs.values() if j.owner == pitch.lab_id and j.status == "open"]
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


def judge_pitches(world: World, auction: Auction) -> dict[str, JudgeScore]:
    """Score every pitch of an auction against the server's truth."""
    block = world.blocks[auction.block_id]
    ceiling = max(1e-9, block.hours * world.params.value_per_hour_cap)
    wins = {a.winner for a in world.auctions.values() if a.status == "awarded" and a.winner}
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
