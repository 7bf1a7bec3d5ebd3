"""The rules: validate and apply one seat's action, and advance the clock.

Every handler validates completely before it mutates anything, so an invalid action raises
:class:`ActionError` and leaves the world exactly as it was (no partial transfer, no status flip).
Each applied action returns the set of labs whose potential it may have changed, so the reward
ledger recomputes only those.

One module per concern: :mod:`.limits` (limits, reputation steps, reward columns per kind of
action), :mod:`.outcome`, :mod:`.checks` (field checks every handler shares), one module per
action family (:mod:`.offers`, :mod:`.holdings`, :mod:`.auctions`, :mod:`.coalitions`), the
dispatch table (:mod:`.dispatch`) and the clock between rounds (:mod:`.clock`).
"""

from .auctions import JUDGE_MODES, resolve_auctions
from .clock import expire, final_settlement, settle_due_jobs, settle_job, start_blocks
from .dispatch import apply_action
from .holdings import auto_allocate
from .limits import (
    CATEGORY_COLUMNS,
    COALITION_TTL_DEFAULT,
    COALITION_TTL_MAX,
    MAX_CONDITIONS,
    MAX_LIST,
    MAX_MESSAGE_CHARS,
    MAX_OPEN_OFFERS,
    MAX_OPEN_PROPOSALS,
    MAX_PAYMENT,
    OFFER_TTL_DEFAULT,
    OFFER_TTL_MAX,
    REP_BREACH,
    REP_FAIR_DEAL,
    REP_HONOURED,
    REP_INVALID,
    REP_SPAM,
)
from .outcome import ActionError, Outcome

__all__ = [
    "CATEGORY_COLUMNS",
    "COALITION_TTL_DEFAULT",
    "COALITION_TTL_MAX",
    "JUDGE_MODES",
    "MAX_CONDITIONS",
    "MAX_LIST",
    "MAX_MESSAGE_CHARS",
    "MAX_OPEN_OFFERS",
    "MAX_OPEN_PROPOSALS",
    "MAX_PAYMENT",
    "OFFER_TTL_DEFAULT",
    "OFFER_TTL_MAX",
    "REP_BREACH",
    "REP_FAIR_DEAL",
    "REP_HONOURED",
    "REP_INVALID",
    "REP_SPAM",
    "ActionError",
    "Outcome",
    "apply_action",
    "auto_allocate",
    "expire",
    "final_settlement",
    "resolve_auctions",
    "settle_due_jobs",
    "settle_job",
    "start_blocks",
]
