"""Named holdout seed ranges: where a run is chosen, where it is reported, where it is checked.

A method tuned by looking at the numbers on the seeds it is then reported on has fitted those
seeds: its reported gain is partly the selection. So the holdout split's seeds are cut, once and in
advance, into three disjoint ranges with one job each:

- ``validation`` (seeds 0–9,999): what every run on the way is judged on, as often as wanted. Its
  first 200 seeds are the historical holdout seeds 0–199 every documented run so far reported.
- ``test`` (10,000–19,999): what the documented evidence is reported on, looked at once per run
  (``gpu-arena train pipeline --eval-range test``; a second look is refused unless asked for, and
  then recorded in the evidence).
- ``check`` (20,000–29,999): one more look at the model about to be documented, on seeds neither
  the choice nor the report saw, before calling it done.

An evaluation of ``n`` seeds on a range plays its first ``n`` seeds (``start .. start + n - 1``);
``n`` may not exceed the range's size, so the ranges never overlap. The bounds are fixed: moving
them would let a range be re-cut after its numbers were seen.
"""

from __future__ import annotations

from dataclasses import dataclass

RANGE_SIZE = 10_000  # seeds per range: far more than an evaluation plays (n = 200 per task today)


@dataclass(frozen=True)
class HoldoutRange:
    """A fixed range of holdout seeds ``start .. start + size - 1`` and what it is for. ``once``: a run
    looks at it once (the test and check ranges); the validation range may be looked at at will."""

    name: str
    start: int
    purpose: str
    once: bool
    size: int = RANGE_SIZE

    @property
    def last(self) -> int:
        return self.start + self.size - 1

    def seeds(self, n: int) -> list[int]:
        """The range's first ``n`` seeds."""
        if not 1 <= n <= self.size:
            raise ValueError(f"the {self.name} range holds {self.size:,} seeds; asked for {n:,}")
        return list(range(self.start, self.start + n))

    def bounds(self) -> list[int]:
        return [self.start, self.last]


RANGES: dict[str, HoldoutRange] = {
    r.name: r for r in (
        HoldoutRange("validation", 0, "what runs on the way are judged on (the historical seeds 0-199 are its first)",
                     once=False),
        HoldoutRange("test", 10_000, "what the documented evidence is reported on, looked at once per run", once=True),
        HoldoutRange("check", 20_000, "one more look at the documented model before calling it done", once=True),
    )
}
DEFAULT_RANGE = "validation"


def get_range(name: str) -> HoldoutRange:
    try:
        return RANGES[name]
    except KeyError:
        raise ValueError(f"unknown holdout range {name!r}; expected one of {', '.join(RANGES)}") from None


def all_bounds() -> dict[str, list[int]]:
    """Every range's first and last seed, as the evidence lists them."""
    return {name: r.bounds() for name, r in RANGES.items()}


__all__ = ["DEFAULT_RANGE", "RANGES", "RANGE_SIZE", "HoldoutRange", "all_bounds", "get_range"]
