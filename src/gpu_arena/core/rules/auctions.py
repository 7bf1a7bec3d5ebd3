"""Emergency auctions: pitches and counter-pitches, and how an auction is awarded (by price, or by a
judge's scores in judge mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..types import (
    Action,
    Auction,
    AuctionStatus,
    BlockStatus,
    Event,
    Message,
    Pitch,
    World,
)

if TYPE_CHECKING:
    from ..judge import PitchJudge
from .checks import finite_amount, message_text, own_job, target_lab
from .outcome import ActionError, Outcome


def _open_auction(world: World) -> Auction:
    for a in world.auctions.values():
        if a.status == AuctionStatus.OPEN and world.round_index < a.close_round:
            return a
    raise ActionError("no_contested_resource", "no contested resource is open for pitches")


def make_pitch(world: World, lab_id: str, action: Action) -> Outcome:
    auction = _open_auction(world)
    if lab_id in auction.pitches:
        raise ActionError("already_pitched", "you have pitched; use counter_pitch to answer or raise")
    bid = finite_amount(action.payment, "payment")
    if bid > world.labs[lab_id].budget + 1e-9:
        raise ActionError("insufficient_budget", f"bid {bid:.2f} exceeds your budget")
    job = own_job(world, action.job_id, lab_id, required=False)
    text = message_text(action.message)
    auction.pitches[lab_id] = Pitch(lab_id, bid, job.job_id if job else None, text, world.round_index)
    world.messages.append(Message(world.round_index, lab_id, None, f"[pitch {bid:.2f}] {text}".strip()))
    return Outcome(note=f"pitched {bid:.2f} for {auction.block_id}")


def counter_pitch(world: World, lab_id: str, action: Action) -> Outcome:
    auction = _open_auction(world)
    target = target_lab(world, action.target_lab_id, lab_id)
    rival = auction.pitches.get(target)
    if rival is None:
        raise ActionError("no_pitch_to_counter", f"{target} has not pitched")
    bid = finite_amount(action.payment, "payment")
    if bid <= rival.bid:
        raise ActionError("pitch_too_low", f"a counter-pitch must bid above {target}'s {rival.bid:.2f}")
    if bid > world.labs[lab_id].budget + 1e-9:
        raise ActionError("insufficient_budget", f"bid {bid:.2f} exceeds your budget")
    job = own_job(world, action.job_id, lab_id, required=False)
    text = message_text(action.message)
    auction.pitches[lab_id] = Pitch(lab_id, bid, job.job_id if job else None, text, world.round_index, target)
    world.messages.append(Message(world.round_index, lab_id, None, f"[counter-pitch {bid:.2f} vs {target}] {text}".strip()))
    return Outcome(note=f"counter-pitched {bid:.2f} against {target}")


JUDGE_MODES = ("none", "rule")


def _award_key(world: World, auction: Auction, judge: PitchJudge | None = None,
               records: dict[str, dict[str, Any]] | None = None) -> Any:
    """How pitches are ranked under the world's judge mode.

    ``none``: the highest bid wins (ties: better reputation, then lab id). ``rule``: the rule
    judge's score against the server's truth wins (ties: higher bid, then lab id), with a model
    ``judge``'s bounded opinion added if one is given (see :mod:`.judge`); the scores and reasons
    are recorded on the pitches, and what the model said in ``records``.
    """
    if world.judge_mode == "none":
        return lambda p: (-p.bid, -world.labs[p.lab_id].reputation, p.lab_id)
    if world.judge_mode == "rule":
        from ..judge import judge_pitches

        scores = judge_pitches(world, auction, judge, records)
        for lab_id, sc in scores.items():
            auction.pitches[lab_id].score = round(sc.score, 6)
            auction.pitches[lab_id].reasons = sc.reasons
        return lambda p: (-scores[p.lab_id].score, -p.bid, p.lab_id)
    raise ValueError(f"unknown judge_mode {world.judge_mode!r}; known: {', '.join(JUDGE_MODES)}")


def resolve_auctions(world: World, *, final: bool = False, judge: PitchJudge | None = None,
                     records: dict[str, dict[str, Any]] | None = None) -> set[str]:
    """Award contested resources whose pitching window has closed (by bid, or by the judge).

    A model ``judge`` (judge mode only) is asked only about auctions that will be awarded."""
    affected: set[str] = set()
    for a in world.auctions.values():
        if a.status != AuctionStatus.OPEN or (world.round_index < a.close_round and not final):
            continue
        block = world.blocks[a.block_id]
        valid = [p for p in a.pitches.values()
                 if p.bid <= world.labs[p.lab_id].budget + 1e-9 and not world.labs[p.lab_id].finished]
        awardable = bool(valid) and block.start_round > world.round_index
        # in judge mode this also records every pitch's score and reasons
        rank = _award_key(world, a, judge if awardable else None, records)
        if not valid or block.start_round <= world.round_index:
            a.status = AuctionStatus.UNSOLD
            block.status = BlockStatus.IDLE
            world.events.append(Event(world.round_index, "auction_unsold", f"{a.block_id} was not sold",
                                      {"auction_id": a.auction_id}))
            continue
        winner = min(valid, key=rank)
        lab = world.labs[winner.lab_id]
        lab.budget -= winner.bid  # paid to the market: money leaves the economy
        block.owner, block.status = winner.lab_id, BlockStatus.FREE
        a.status, a.winner, a.price = "awarded", winner.lab_id, winner.bid
        affected.add(winner.lab_id)
        world.events.append(Event(world.round_index, "auction_awarded",
                                  f"{winner.lab_id} won {a.block_id} for {winner.bid:.2f}",
                                  {"auction_id": a.auction_id, "winner": winner.lab_id, "price": winner.bid}))
    return affected
