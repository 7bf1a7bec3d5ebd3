"""The rules' limits (list lengths, prices, open offers, expiries), reputation steps, and which reward
column each kind of action books its potential change in.
"""

from __future__ import annotations

from ..types import (
    CONDITION_KEYS,
)

MAX_MESSAGE_CHARS = 500


MAX_LIST = 16


MAX_CONDITIONS = len(CONDITION_KEYS)


MAX_OPEN_OFFERS = 6


MAX_OPEN_PROPOSALS = 3


MAX_PAYMENT = 1e7


# rounds a target has to answer, counted from the round after the offer is made
OFFER_TTL_DEFAULT, OFFER_TTL_MAX = 2, 5


COALITION_TTL_DEFAULT, COALITION_TTL_MAX = 3, 6


REP_BREACH = -0.15


REP_INVALID = -0.01


REP_SPAM = -0.02


REP_FAIR_DEAL = 0.02


REP_HONOURED = 0.03


# Which reward column an action's potential change belongs to: (value part, money part).
CATEGORY_COLUMNS: dict[str, tuple[str, str]] = {
    "deal": ("deal_quality_score", "deal_quality_score"),
    "allocation": ("job_utility_score", "budget_efficiency_score"),
    "coalition": ("coalition_reliability_score", "coalition_reliability_score"),
    "judge": ("judge_argument_score", "judge_argument_score"),
    "time": ("negotiation_efficiency_score", "negotiation_efficiency_score"),
    "shock": ("market_adaptation_score", "market_adaptation_score"),
}
