"""Who plays the seats an environment does not drive: the ``opponents`` value, parsed once.

Every form the package takes is read by :meth:`OpponentsSpec.parse` into one frozen value:

* nothing (``None`` or ``""``): every other seat plays the archetype its world assigned it, with
  the world's parameters for it (:data:`DEFAULT_OPPONENTS`, ``"archetypes"``);
* one policy for every other seat: a name (``"rule_expert"``, ``"llm:openai:<model>@<base_url>"``,
  ``"archetypes"``);
* a list in seat order: a sequence of names or policy objects, or the text ``"a,b,c"`` (a policy
  name holds no comma);
* seat -> policy: a mapping of names or policy objects, or the text ``"lab_1=a,lab_2=b"``; a seat
  left out plays its archetype.

The names are not built here (``make_policy`` builds them, and families such as ``llm:`` load
only there); :attr:`OpponentsSpec.names` lists them for a caller that checks them first.
:data:`SELF_PLAY` (``"self"``) is a name evaluation gives a meaning: the evaluated policy in every
other seat (:meth:`OpponentsSpec.resolve_self`). A value of none of these forms is an
:class:`OpponentsError` (a ``ValueError``) saying what is expected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

DEFAULT_OPPONENTS = "archetypes"  # a seat plays the archetype its world assigned it, with the world's parameters
SELF_PLAY = "self"  # in evaluation: the evaluated policy fills every other seat too

_SEAT_PAIR = re.compile(r"lab_\d+=")  # a seat=policy pair starts with a seat id (a name's options hold '=' too)


class OpponentsError(ValueError):
    """An ``opponents`` value of no form :class:`OpponentsSpec` reads, or one that does not fit the
    world's seats."""


def _is_policy(value: Any) -> bool:
    return isinstance(value, str) or callable(getattr(value, "act", None))


@dataclass(frozen=True, slots=True)
class OpponentsSpec:
    """Who plays the other seats: ``every`` (``policies[0]`` in each), ``order`` (``policies`` in
    seat order) or ``seats`` (``policies[i]`` in seat ``seats[i]``, the rest their archetype). A
    policy is a name or an object with ``act``. Build it with :meth:`parse`."""

    form: Literal["every", "order", "seats"] = "every"
    policies: tuple[Any, ...] = (DEFAULT_OPPONENTS,)
    seats: tuple[str, ...] = ()

    @classmethod
    def parse(cls, value: Any) -> OpponentsSpec:
        """The spec ``value`` says (see the module): None, a name or its text forms, a sequence, a
        mapping, or a spec (returned as it is)."""
        if isinstance(value, OpponentsSpec):
            return value
        if value is None:
            return cls()
        if isinstance(value, str):
            return cls._from_text(value)
        if isinstance(value, Mapping):
            for seat, policy in value.items():
                if not isinstance(seat, str):
                    raise OpponentsError(f"opponents names seats that are not opponents: {seat!r}")
                if not _is_policy(policy):
                    raise OpponentsError(f"opponent for {seat} must be a policy name or an object with act()")
            return cls("seats", tuple(value.values()), tuple(value)) if value else cls()
        if isinstance(value, Sequence):
            for policy in value:
                if not _is_policy(policy):
                    raise OpponentsError(f"opponents lists {policy!r}: expected policy names or objects with act()")
            return cls("order", tuple(value))
        raise OpponentsError("opponents must be a policy name, a list of names, or a mapping seat -> name")

    @classmethod
    def _from_text(cls, text: str) -> OpponentsSpec:
        """``name``, ``a,b,c`` (seat order) or ``lab_1=a,lab_2=b``; blank: the default."""
        items = [x.strip() for x in text.split(",") if x.strip()]
        if any(_SEAT_PAIR.match(x) for x in items):
            pairs = [x.split("=", 1) for x in items]
            if any(len(p) != 2 or not p[0].strip() or not p[1].strip() for p in pairs):
                raise OpponentsError(f"expected seat=policy pairs, got {text!r}")
            by_seat = {seat.strip(): name.strip() for seat, name in pairs}
            return cls("seats", tuple(by_seat.values()), tuple(by_seat))
        if len(items) > 1:
            return cls("order", tuple(items))
        return cls("every", (items[0],)) if items else cls()

    # ------------------------------------------------------------------ reading it

    @property
    def one(self) -> Any | None:
        """The one policy every other seat plays, or None where seats differ."""
        return self.policies[0] if self.form == "every" else None

    @property
    def is_default(self) -> bool:
        """Whether every other seat plays its world's archetype."""
        return self.one == DEFAULT_OPPONENTS

    @property
    def self_play(self) -> bool:
        """Whether it is :data:`SELF_PLAY`: the evaluated policy in every other seat."""
        return self.one == SELF_PLAY

    @property
    def names(self) -> tuple[str, ...]:
        """The policy names it holds, in order (objects left out)."""
        return tuple(p for p in self.policies if isinstance(p, str))

    def resolve_self(self, policy: Any) -> OpponentsSpec:
        """``policy`` in every other seat where this is :data:`SELF_PLAY`, else this spec."""
        return OpponentsSpec("every", (policy,)) if self.self_play else self

    def for_seats(self, others: Sequence[str]) -> dict[str, Any]:
        """The policy of each seat of ``others`` (the world's seats but the driven one, in world
        order); :class:`OpponentsError` where the spec does not fit them."""
        if self.form == "every":
            return dict.fromkeys(others, self.policies[0])
        if self.form == "seats":
            extra = set(self.seats) - set(others)
            if extra:
                raise OpponentsError(f"opponents names seats that are not opponents: {', '.join(sorted(extra))}")
            chosen = dict(zip(self.seats, self.policies, strict=True))
            return {lid: chosen.get(lid, DEFAULT_OPPONENTS) for lid in others}
        if len(self.policies) != len(others):
            raise OpponentsError(f"opponents lists {len(self.policies)} policies for {len(others)} seats "
                                 f"({', '.join(others)})")
        return dict(zip(others, self.policies, strict=True))

    def name_for(self, seat: str) -> str | None:
        """The name the spec gives ``seat`` outright (one name for all, or the seat's own), if any."""
        if self.form == "every":
            return self.policies[0] if isinstance(self.policies[0], str) else None
        if self.form == "seats":
            chosen = dict(zip(self.seats, self.policies, strict=True)).get(seat)
            return chosen if isinstance(chosen, str) else None
        return None

    def to_value(self) -> str | list[Any] | dict[str, Any]:
        """The plain value it was read from, as results and stores record it: a name, a list in
        seat order, or seat -> name."""
        if self.form == "every":
            return self.policies[0]
        if self.form == "order":
            return list(self.policies)
        return dict(zip(self.seats, self.policies, strict=True))


__all__ = ["DEFAULT_OPPONENTS", "SELF_PLAY", "OpponentsError", "OpponentsSpec"]
