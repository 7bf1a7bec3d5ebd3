"""What applying an action yields: an :class:`ActionError` (refused, nothing changed) or an
:class:`Outcome`.
"""

from __future__ import annotations

from collections.abc import Iterable


class ActionError(Exception):
    """A rejected action: ``code`` is stable and machine-readable, ``message`` is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Outcome:
    """What an applied action did: its column category, affected labs, breaches, a note."""

    __slots__ = ("affected", "breaches", "category", "note")

    def __init__(self, category: str = "none", affected: Iterable[str] = (), note: str = "",
                 breaches: int = 0) -> None:
        self.category = category
        self.affected = set(affected)
        self.note = note
        self.breaches = breaches
