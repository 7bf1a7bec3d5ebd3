//! The plain data of the GPU economy, mirroring `gpu_arena.core.types`: blocks, jobs, labs,
//! offers, coalitions, pitches, auctions, messages, events, the shock schedule and the world.
//!
//! Maps keyed by id are `IndexMap`s: Python's dicts keep insertion order and the rules iterate
//! them in that order, so the port must too. Statuses are enums whose `as_str` is the Python
//! constant's value.

use indexmap::IndexMap;

use crate::rng::PyRandom;
use crate::value::PyValue;

macro_rules! status_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// The Python constant's value.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The status named `text`, if any.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

status_enum!(
    /// `BlockStatus`: only `Free` and `Reserved` blocks are the owner's to trade or plan.
    BlockStatus {
        Free => "free", Reserved => "reserved", Allocated => "allocated", Committed => "committed",
        Running => "running", Done => "done", Idle => "idle", Failed => "failed", Auction => "auction",
    }
);

status_enum!(
    /// `JobStatus`.
    JobStatus { Open => "open", Completed => "completed", Partial => "partial", Failed => "failed" }
);

status_enum!(
    /// `OfferStatus`.
    OfferStatus {
        Open => "open", Accepted => "accepted", Rejected => "rejected", Expired => "expired",
        Countered => "countered", Superseded => "superseded", Withdrawn => "withdrawn",
    }
);

status_enum!(
    /// `CoalitionStatus`.
    CoalitionStatus {
        Proposed => "proposed", Formed => "formed", Expired => "expired", Failed => "failed", Settled => "settled",
    }
);

status_enum!(
    /// `AuctionStatus`.
    AuctionStatus { Open => "open", Awarded => "awarded", Unsold => "unsold" }
);

impl BlockStatus {
    /// `PLANNABLE`: the statuses a lab may plan, trade or reserve.
    pub fn plannable(self) -> bool {
        matches!(self, BlockStatus::Free | BlockStatus::Reserved)
    }

    /// `ASSIGNED`: the statuses of a block that runs (or ran, or will run) for a job.
    pub fn assigned(self) -> bool {
        matches!(self, BlockStatus::Allocated | BlockStatus::Committed | BlockStatus::Running | BlockStatus::Done)
    }
}

/// `Block`: `gpu_count` GPUs for rounds `[start_round, start_round + duration)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub block_id: String,
    pub owner: Option<String>,
    pub gpu_count: i64,
    pub start_round: i64,
    pub duration: i64,
    pub reliability: f64,
    pub energy_cost: f64,
    pub status: BlockStatus,
    pub job_id: Option<String>,
    pub reserved_for: Option<String>,
    pub coalition_id: Option<String>,
    pub no_resale: bool,
    pub must_allocate: bool,
    pub energy_paid: f64,
}

impl Block {
    pub fn hours(&self) -> i64 {
        self.gpu_count * self.duration
    }

    pub fn end_round(&self) -> i64 {
        self.start_round + self.duration
    }
}

/// `Job`: a lab's private job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub job_id: String,
    pub owner: String,
    pub gpu_hours_required: i64,
    pub deadline_round: i64,
    pub value: f64,
    pub min_reliability: f64,
    pub partial_credit: f64,
    pub pooled: bool,
    pub status: JobStatus,
    pub realized_value: f64,
    pub surged: bool,
    pub coalition_id: Option<String>,
}

/// `Lab`: a player. `last_signature` is the spam check's `(field, repr)` pairs of its last move.
#[derive(Clone, Debug, PartialEq)]
pub struct Lab {
    pub lab_id: String,
    pub budget: f64,
    pub reputation: f64,
    pub initial_budget: f64,
    pub archetype: String,
    pub params: IndexMap<String, f64>,
    pub finished: bool,
    pub realized_value: f64,
    pub energy_paid: f64,
    pub actions: i64,
    pub invalid_actions: i64,
    pub offers_made: i64,
    pub offers_received: i64,
    pub deals: i64,
    pub commitments: i64,
    pub breaches: i64,
    pub last_signature: Option<Vec<(String, String)>>,
}

/// `Offer`.
#[derive(Clone, Debug, PartialEq)]
pub struct Offer {
    pub offer_id: String,
    pub sender: String,
    pub target: String,
    pub block_ids: Vec<String>,
    pub requested_block_ids: Vec<String>,
    pub payment: f64,
    pub created_round: i64,
    pub expires_round: i64,
    pub conditions: IndexMap<String, bool>,
    pub message: String,
    pub status: OfferStatus,
    pub parent_offer_id: Option<String>,
    pub settled_round: Option<i64>,
    pub requested_payment: f64,
    pub job_id: Option<String>,
}

/// `Coalition`: a pooled-capacity contract. `consented` is a Python set: its order is never
/// observable (the rules only test membership and size), so a sorted vector stands for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Coalition {
    pub coalition_id: String,
    pub proposer: String,
    pub members: Vec<String>,
    pub job_id: String,
    pub commitments: IndexMap<String, Vec<String>>,
    pub payment: f64,
    pub shares: IndexMap<String, f64>,
    pub created_round: i64,
    pub expires_round: i64,
    pub consented: Vec<String>,
    pub status: CoalitionStatus,
    pub breaches: Vec<String>,
    pub excused: Vec<String>,
}

impl Coalition {
    pub fn has_consented(&self, lab_id: &str) -> bool {
        self.consented.iter().any(|x| x == lab_id)
    }

    /// `consented.add(lab_id)`.
    pub fn consent(&mut self, lab_id: &str) {
        if let Err(at) = self.consented.binary_search_by(|x| x.as_str().cmp(lab_id)) {
            self.consented.insert(at, lab_id.to_string());
        }
    }
}

/// `Pitch`.
#[derive(Clone, Debug, PartialEq)]
pub struct Pitch {
    pub lab_id: String,
    pub bid: f64,
    pub job_id: Option<String>,
    pub message: String,
    pub round_index: i64,
    pub counter_to: Option<String>,
    pub score: Option<f64>,
    pub reasons: Vec<String>,
}

/// `Auction`: a contested block the market sells to the best pitch at `close_round`.
#[derive(Clone, Debug, PartialEq)]
pub struct Auction {
    pub auction_id: String,
    pub block_id: String,
    pub opened_round: i64,
    pub close_round: i64,
    pub pitches: IndexMap<String, Pitch>,
    pub status: AuctionStatus,
    pub winner: Option<String>,
    pub price: f64,
}

/// `Message`.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub round_index: i64,
    pub sender: String,
    pub target: Option<String>,
    pub text: String,
}

/// `Event`: a public announcement; `data` keeps its keys in insertion order.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub round_index: i64,
    pub kind: String,
    pub text: String,
    pub data: Vec<(String, PyValue)>,
}

/// `ScheduledShock`.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduledShock {
    pub round_index: i64,
    pub kind: String,
    pub magnitude: f64,
}

/// `TaskParams`: the ranges of one task and split (only read by the rules and shocks).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskParams {
    pub task: String,
    pub split: String,
    pub n_labs: (i64, i64),
    pub rounds: (i64, i64),
    pub jobs_per_lab: (i64, i64),
    pub blocks_per_lab: (i64, i64),
    pub n_shocks: (i64, i64),
    pub shock_weights: IndexMap<String, f64>,
    pub energy_spike: (f64, f64),
    pub demand_surge: (f64, f64),
    pub reliability_drop: (f64, f64),
    pub budget_frac: (f64, f64),
    pub pooled_jobs: i64,
    pub opponent_ranges: IndexMap<String, (f64, f64)>,
    pub value_per_hour_cap: f64,
}

/// `World`: the whole state of one episode.
#[derive(Clone, Debug)]
pub struct World {
    pub task: String,
    pub split: String,
    pub seed: i64,
    pub max_rounds: i64,
    pub params: TaskParams,
    pub rng: PyRandom,
    pub labs: IndexMap<String, Lab>,
    pub blocks: IndexMap<String, Block>,
    pub jobs: IndexMap<String, Job>,
    pub shock_schedule: Vec<ScheduledShock>,
    pub round_index: i64,
    pub offers: IndexMap<String, Offer>,
    pub coalitions: IndexMap<String, Coalition>,
    pub auctions: IndexMap<String, Auction>,
    pub messages: Vec<Message>,
    pub events: Vec<Event>,
    pub done: bool,
    pub next_id: i64,
    pub initial_potential: IndexMap<String, f64>,
    pub reward_scale: IndexMap<String, f64>,
    pub judge_mode: String,
    pub version: i64,
}

impl World {
    /// `World.new_id`: the next id with `prefix`.
    pub fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{}_{}", prefix, self.next_id)
    }

    /// `World.lab_ids`.
    pub fn lab_ids(&self) -> Vec<String> {
        self.labs.keys().cloned().collect()
    }
}

/// `Action`: one seat's move as the rules read it. Every field holds what the seat sent (the rules
/// check types and ranges themselves, in the Python order, so the same error comes first); a
/// field left out holds its Python default (`PyValue::None`, or an empty tuple for the lists).
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    pub action_type: PyValue,
    pub target_lab_id: PyValue,
    pub offer_id: PyValue,
    pub coalition_id: PyValue,
    pub block_ids: PyValue,
    pub requested_block_ids: PyValue,
    pub job_id: PyValue,
    pub payment: PyValue,
    pub requested_payment: PyValue,
    pub message: PyValue,
    pub conditions: PyValue,
    pub member_lab_ids: PyValue,
    pub shares: PyValue,
    pub expires_in: PyValue,
}

impl Action {
    /// `Action(action_type)` with every other field at its default.
    pub fn of(action_type: &str) -> Self {
        Action {
            action_type: PyValue::Str(action_type.to_string()),
            target_lab_id: PyValue::None,
            offer_id: PyValue::None,
            coalition_id: PyValue::None,
            block_ids: PyValue::Tuple(Vec::new()),
            requested_block_ids: PyValue::Tuple(Vec::new()),
            job_id: PyValue::None,
            payment: PyValue::None,
            requested_payment: PyValue::None,
            message: PyValue::None,
            conditions: PyValue::None,
            member_lab_ids: PyValue::Tuple(Vec::new()),
            shares: PyValue::None,
            expires_in: PyValue::None,
        }
    }

    /// The action type where it is a string (the rules refuse any other).
    pub fn kind(&self) -> Option<&str> {
        match &self.action_type {
            PyValue::Str(s) => Some(s),
            _ => None,
        }
    }
}
