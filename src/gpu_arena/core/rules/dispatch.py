"""One seat's action applied to the world: the handler of each action type, and the actions that touch
nothing but the seat (messages, waiting, finishing).
"""

from __future__ import annotations

from ..types import (
    ACTION_TYPES,
    Action,
    CoalitionStatus,
    Message,
    OfferStatus,
    World,
)
from .auctions import counter_pitch, make_pitch
from .checks import coalition_peers, message_text, target_lab
from .coalitions import commit, form_coalition
from .holdings import allocate, auto_allocate, release, reserve
from .offers import accept_offer, counter_offer, reject_offer, send_offer
from .outcome import ActionError, Outcome


def apply_action(world: World, lab_id: str, action: Action) -> Outcome:
    """Validate and apply ``action`` for ``lab_id``. Raises ActionError and changes nothing if invalid."""
    if world.done:
        raise ActionError("episode_done", "the episode is over")
    if not isinstance(action.action_type, str) or action.action_type not in ACTION_TYPES:
        raise ActionError("unknown_action_type",
                          f"unknown action_type {action.action_type!r}; expected one of {', '.join(ACTION_TYPES)}")
    lab = world.labs[lab_id]
    if lab.finished and action.action_type != "wait":
        raise ActionError("seat_finished", f"{lab_id} has finished; it can only wait")
    handler = _HANDLERS[action.action_type]
    return handler(world, lab_id, action)


def _send_message(world: World, lab_id: str, action: Action) -> Outcome:
    target = None
    if action.target_lab_id is not None:
        target = target_lab(world, action.target_lab_id, lab_id)
    text = message_text(action.message)
    if not text.strip():
        raise ActionError("empty_message", "message is empty")
    world.messages.append(Message(world.round_index, lab_id, target, text))
    return Outcome(note="message sent")


def _wait(world: World, lab_id: str, action: Action) -> Outcome:
    return Outcome(note="waited")


def _finish(world: World, lab_id: str, action: Action) -> Outcome:
    """Finish negotiating: the server allocates the lab's blocks optimally; nothing is forfeited."""
    allocated = auto_allocate(world, lab_id)
    lab = world.labs[lab_id]
    lab.finished = True
    for o in world.offers.values():
        if o.status == OfferStatus.OPEN and o.sender == lab_id:
            o.status = OfferStatus.WITHDRAWN
    for c in world.coalitions.values():
        if c.status == CoalitionStatus.PROPOSED and c.proposer == lab_id:
            c.status = CoalitionStatus.EXPIRED
    note = "finished" + (f"; allocated {', '.join(allocated)}" if allocated else "")
    return Outcome("allocation", {lab_id} | coalition_peers(world, lab_id), note)


_HANDLERS = {
    "send_offer": send_offer,
    "accept_offer": accept_offer,
    "reject_offer": reject_offer,
    "counter_offer": counter_offer,
    "make_pitch": make_pitch,
    "counter_pitch": counter_pitch,
    "reserve_capacity": reserve,
    "release_capacity": release,
    "form_coalition": form_coalition,
    "commit_to_coalition": commit,
    "allocate_to_job": allocate,
    "send_message": _send_message,
    "wait": _wait,
    "finish": _finish,
}
assert set(_HANDLERS) == set(ACTION_TYPES)
