//! `gpu_arena.core.rules.limits`: the rules' limits, reputation steps, and the reward columns each
//! kind of action books its potential change in.

pub const MAX_MESSAGE_CHARS: usize = 500;
pub const MAX_LIST: usize = 16;
pub const MAX_CONDITIONS: usize = 3; // len(CONDITION_KEYS)
pub const MAX_OPEN_OFFERS: usize = 6;
pub const MAX_OPEN_PROPOSALS: usize = 3;
pub const MAX_PAYMENT: f64 = 1e7;
pub const OFFER_TTL_DEFAULT: i64 = 2;
pub const OFFER_TTL_MAX: i64 = 5;
pub const COALITION_TTL_DEFAULT: i64 = 3;
pub const COALITION_TTL_MAX: i64 = 6;
pub const REP_BREACH: f64 = -0.15;
pub const REP_INVALID: f64 = -0.01;
pub const REP_SPAM: f64 = -0.02;
pub const REP_FAIR_DEAL: f64 = 0.02;
pub const REP_HONOURED: f64 = 0.03;

/// `CONDITION_KEYS`, in their order.
pub const CONDITION_KEYS: [&str; 3] = ["must_allocate_to_job", "no_resale", "coalition_only"];

/// `ACTION_TYPES`, in their order.
pub const ACTION_TYPES: [&str; 14] = [
    "send_offer", "accept_offer", "reject_offer", "counter_offer", "make_pitch", "counter_pitch",
    "reserve_capacity", "release_capacity", "form_coalition", "commit_to_coalition", "allocate_to_job",
    "send_message", "wait", "finish",
];

/// `CATEGORY_COLUMNS`: a category's (value part, money part) reward columns.
pub fn category_columns(category: &str) -> Option<(&'static str, &'static str)> {
    match category {
        "deal" => Some(("deal_quality_score", "deal_quality_score")),
        "allocation" => Some(("job_utility_score", "budget_efficiency_score")),
        "coalition" => Some(("coalition_reliability_score", "coalition_reliability_score")),
        "judge" => Some(("judge_argument_score", "judge_argument_score")),
        "time" => Some(("negotiation_efficiency_score", "negotiation_efficiency_score")),
        "shock" => Some(("market_adaptation_score", "market_adaptation_score")),
        _ => None,
    }
}
