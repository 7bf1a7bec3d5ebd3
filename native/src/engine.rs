//! The multi-seat episode, mirroring `gpu_arena.core.engine.Episode`: simultaneous rounds in an
//! order drawn from the world's RNG, the clock, and the potential-based reward ledger; and a
//! move's transcript record and the ids it reaches, mirroring `gpu_arena.core.records`.
//!
//! What a round does, and in which order, is the Python `Episode.step`'s; the comments there say
//! why. A round's transcript entry is kept as Rust data and written as Python's only when read.

use std::collections::{BTreeSet, HashSet};

use indexmap::IndexMap;

use crate::allocation::FrontierCache;
use crate::rules::dispatch::apply_action;
use crate::rules::limits::{category_columns, REP_INVALID};
use crate::rules::outcome::{ActionError, Outcome};
use crate::rules::{auctions, clock};
use crate::shocks::fire_due_shocks;
use crate::types::{Action, World};
use crate::valuation::{parts_of, potential_parts, LabValuer};
use crate::value::{fsum, py_round, PyValue};

pub const PENALTY_INVALID: f64 = 0.01;
pub const PENALTY_SPAM: f64 = 0.005;
pub const PENALTY_BREACH: f64 = 0.02;
pub const SPAM_CAP: f64 = 0.03;
pub const BREACH_CAP: f64 = 0.06;

/// `COMPONENT_COLUMNS` then `PENALTY_COLUMNS`: the ledger's columns, in order.
pub const LEDGER_COLUMNS: [&str; 10] = [
    "job_utility_score", "deal_quality_score", "coalition_reliability_score", "judge_argument_score",
    "budget_efficiency_score", "negotiation_efficiency_score", "market_adaptation_score",
    "invalid_action_penalty", "spam_penalty", "breach_penalty",
];
const COMPONENTS: usize = 7;
const INVALID: usize = 7;
const SPAM: usize = 8;
const BREACH: usize = 9;

/// `CONFLICT_CODES`: errors another seat's earlier move in the same round can cause.
const CONFLICT_CODES: [&str; 15] = [
    "block_not_owned", "block_not_tradeable", "block_reserved", "block_committed", "block_used",
    "offer_not_open", "offer_stale", "coalition_not_open", "coalition_exists", "lab_finished",
    "pitch_too_low", "no_contested_resource", "already_pitched", "condition_unmet", "counterparty_cannot_pay",
];

fn column(name: &str) -> usize {
    LEDGER_COLUMNS.iter().position(|c| *c == name).expect("a ledger column")
}

/// One seat's move for a round: an action, or one refused before the rules read it
/// (`RejectedAction`: its code and message).
#[derive(Clone, Debug)]
pub enum Move {
    Act(Action),
    Rejected { code: String, message: String },
}

/// `ActionResult`.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionResult {
    pub ok: bool,
    pub code: String,
    pub message: String,
}

/// A transcript record of one move: the action's non-default fields in field order, or the
/// refusal of a move the round could not read.
pub type Record = Vec<(String, PyValue)>;

/// One round of the transcript (`Episode.step`'s `entry`), before it is written as Python data.
#[derive(Clone, Debug)]
pub struct RoundEntry {
    pub round: i64,
    pub order: Vec<String>,
    pub actions: Vec<(String, Record)>,
    pub results: Vec<(String, bool, String)>,
    pub rewards: Vec<(String, f64)>,
}

/// What one round did (`RoundReport`): rewards are rows of `LEDGER_COLUMNS` then
/// `normalized_reward`.
#[derive(Clone, Debug)]
pub struct RoundReport {
    pub round_index: i64,
    pub order: Vec<String>,
    pub results: IndexMap<String, ActionResult>,
    pub rewards: IndexMap<String, [f64; 11]>,
    pub done: bool,
}

/// `Episode`: see the Python class for the contract. The model judge is not here: an episode
/// with one stays in Python.
///
/// A clone is an independent copy (`Episode.fork`): the world with its random stream, the ledger
/// and the transcript are copied; only the frontier cache is shared, a handle to frontiers solved
/// by value (which no play changes), so a fork reuses what its parent solved.
#[derive(Clone)]
pub struct Episode {
    pub world: World,
    pub controlled: Vec<String>,
    pub phi: IndexMap<String, (f64, f64)>,
    pub returns: IndexMap<String, f64>,
    pub penalties: IndexMap<String, f64>,
    pub transcript: Vec<RoundEntry>,
    pub last_results: IndexMap<String, ActionResult>,
    pub last_rewards: IndexMap<String, [f64; 11]>,
    ledger: IndexMap<String, [f64; 10]>,
    pub frontiers: FrontierCache,
}

fn is_plain(v: &PyValue) -> bool {
    matches!(v, PyValue::None | PyValue::Bool(_) | PyValue::Int(_) | PyValue::Float(_) | PyValue::Str(_))
}

/// `_flat`: a list's entries (or a mapping's keys and values) are all plain.
fn flat(v: &PyValue) -> bool {
    match v {
        PyValue::List(xs) | PyValue::Tuple(xs) => xs.iter().all(is_plain),
        PyValue::Dict(kv) => kv.iter().all(|(k, x)| is_plain(k) && is_plain(x)),
        _ => false,
    }
}

fn as_list(v: &PyValue) -> PyValue {
    match v {
        PyValue::Tuple(xs) => PyValue::List(xs.clone()),
        other => other.clone(),
    }
}

/// The action's fields in `Action`'s order, by name.
fn fields(a: &Action) -> [(&'static str, &PyValue); 14] {
    [
        ("action_type", &a.action_type), ("target_lab_id", &a.target_lab_id), ("offer_id", &a.offer_id),
        ("coalition_id", &a.coalition_id), ("block_ids", &a.block_ids),
        ("requested_block_ids", &a.requested_block_ids), ("job_id", &a.job_id), ("payment", &a.payment),
        ("requested_payment", &a.requested_payment), ("message", &a.message), ("conditions", &a.conditions),
        ("member_lab_ids", &a.member_lab_ids), ("shares", &a.shares), ("expires_in", &a.expires_in),
    ]
}

/// `action_record`: the non-default fields of an action, JSON-ready, or the `invalid_type`
/// refusal of a field no rule can read.
pub fn action_record(action: &Action) -> Result<Record, ActionError> {
    let kind = &action.action_type;
    if !(is_plain(kind) || matches!(kind, PyValue::Tuple(_)) && flat(kind)) {
        return Err(ActionError::new("invalid_type",
                                    format!("action_type must be a string, not {}", kind.type_name())));
    }
    let mut out: Record = vec![("action_type".to_string(), as_list(kind))];
    for (name, v) in fields(action).into_iter().skip(1) {
        match v {
            PyValue::None => continue,
            PyValue::Tuple(xs) | PyValue::List(xs) => {
                if xs.is_empty() {
                    if matches!(v, PyValue::List(_)) {  // an empty tuple is a default; an empty list is kept
                        out.push((name.to_string(), v.clone()));
                    }
                    continue;
                }
                if !flat(v) {
                    return Err(ActionError::new("invalid_type",
                                                format!("{name} must hold strings, numbers or true/false only")));
                }
                out.push((name.to_string(), as_list(v)));
            }
            PyValue::Dict(kv) => {
                if kv.is_empty() {
                    continue;
                }
                if !flat(v) {
                    return Err(ActionError::new("invalid_type",
                                                format!("{name} must hold strings, numbers or true/false only")));
                }
                out.push((name.to_string(), v.clone()));
            }
            _ => out.push((name.to_string(), v.clone())),
        }
    }
    Ok(out)
}

/// `json_standard`: no NaN or infinity anywhere (a Rust string holds no lone surrogate).
pub fn json_standard(v: &PyValue) -> bool {
    match v {
        PyValue::Float(x) => x.is_finite(),
        PyValue::List(xs) | PyValue::Tuple(xs) => xs.iter().all(json_standard),
        PyValue::Dict(kv) => kv.iter().all(|(k, x)| json_standard(k) && json_standard(x)),
        _ => true,
    }
}

/// `standard_record`: the record as the transcript keeps it.
fn standard_record(record: &Record, result: &ActionResult, overtaken: bool) -> Record {
    if record.iter().all(|(_, v)| json_standard(v)) {
        return record.clone();
    }
    if !result.ok && !overtaken {
        return vec![("rejected".to_string(), PyValue::Str(result.code.clone())),
                    ("message".to_string(), PyValue::Str(result.message.clone()))];
    }
    record.iter().filter(|(_, v)| json_standard(v)).cloned().collect()
}

fn budget_token(lab_id: &str) -> String {
    format!("budget:{lab_id}")
}

/// `referenced_ids`: every block, offer and coalition an action names or reaches.
pub fn referenced_ids(world: &World, lab_id: &str, action: &Action) -> HashSet<String> {
    let mut ids = HashSet::new();
    for v in [&action.block_ids, &action.requested_block_ids] {
        if let PyValue::Tuple(xs) | PyValue::List(xs) = v {
            for x in xs {
                if let PyValue::Str(s) = x {
                    ids.insert(s.clone());
                }
            }
        }
    }
    for v in [&action.offer_id, &action.coalition_id] {
        if let PyValue::Str(s) = v {
            ids.insert(s.clone());
        }
    }
    let offer = match &action.offer_id {
        PyValue::Str(s) => world.offers.get(s),
        _ => None,
    };
    if let Some(o) = offer {
        ids.extend(o.block_ids.iter().cloned());
        ids.extend(o.requested_block_ids.iter().cloned());
    }
    if let PyValue::Str(cid) = &action.coalition_id {
        if let Some(c) = world.coalitions.get(cid) {
            for blocks in c.commitments.values() {
                ids.extend(blocks.iter().cloned());
            }
        }
    }
    let kind = action.kind().unwrap_or("");
    if kind == "finish" || (kind == "allocate_to_job" && !action.job_id.truthy() && !action.block_ids.truthy()) {
        ids.extend(world.blocks.values().filter(|b| b.owner.as_deref() == Some(lab_id)).map(|b| b.block_id.clone()));
    }
    if kind == "make_pitch" || kind == "counter_pitch" {
        ids.extend(world.auctions.keys().cloned());
    }
    if (kind == "send_offer" || kind == "counter_offer") && action.requested_payment.truthy() {
        let mut payer = match &action.target_lab_id {
            PyValue::Str(s) => Some(s.clone()),
            _ => None,
        };
        if let Some(o) = offer {
            payer = Some(if o.target == lab_id { o.sender.clone() } else { o.target.clone() });
        }
        if let Some(p) = payer {
            ids.insert(budget_token(&p));
        }
    }
    if kind == "accept_offer" {
        if let Some(o) = offer {
            if o.payment > 0.0 {
                ids.insert(budget_token(&o.sender));
            }
        }
    }
    ids
}

/// `_text`: a refusal's message as every reader can carry it (always, in Rust: no surrogates).
fn text(message: &str) -> String {
    message.to_string()
}

impl Episode {
    /// `Episode(world, controlled)`.
    pub fn new(world: World, controlled: Vec<String>) -> Result<Self, String> {
        for lid in &controlled {
            if !world.labs.contains_key(lid) {
                return Err(format!("unknown seat {lid:?}"));
            }
        }
        let phi = world.labs.keys().map(|lid| (lid.clone(), potential_parts(&world, lid, None))).collect();
        let zeros = |v: f64| world.labs.keys().map(|lid| (lid.clone(), v)).collect::<IndexMap<_, _>>();
        let returns = zeros(0.0);
        let penalties = zeros(0.0);
        let last_rewards = world.labs.keys().map(|lid| (lid.clone(), [0.0; 11])).collect();
        Ok(Episode { world, controlled, phi, returns, penalties, transcript: Vec::new(), last_results: IndexMap::new(),
                     last_rewards, ledger: IndexMap::new(), frontiers: FrontierCache::default() })
    }

    pub fn done(&self) -> bool {
        self.world.done
    }

    /// `_mark`: an event happened; re-price the potential of `labs` and book the change.
    fn mark<'a>(&mut self, category: &str, labs: impl IntoIterator<Item = &'a String>) {
        self.world.version += 1;
        let Some((vcol, mcol)) = category_columns(category) else { return };
        let (vcol, mcol) = (column(vcol), column(mcol));
        for lid in labs {
            let (value, energy) = LabValuer::new(&self.world, lid, None, Some(self.frontiers.clone())).totals();
            let (v, m) = parts_of(&self.world, lid, value, energy);
            let (pv, pm) = self.phi[lid.as_str()];
            let led = self.ledger.get_mut(lid.as_str()).expect("a lab's ledger");
            led[vcol] += v - pv;
            led[mcol] += m - pm;
            self.phi.insert(lid.clone(), (v, m));
        }
    }

    /// `Episode.step`: at most one move per lab (missing seats wait).
    pub fn step(&mut self, moves: &IndexMap<String, Move>) -> Result<RoundReport, String> {
        if self.world.done {
            return Err("the episode is over; call reset for a new one".to_string());
        }
        self.ledger = self.world.labs.keys().map(|lid| (lid.clone(), [0.0; 10])).collect();
        let mut order: Vec<String> = self.world.labs.keys().cloned().collect();
        self.world.rng.shuffle(&mut order);
        let mut results: IndexMap<String, ActionResult> = IndexMap::new();
        let mut records: Vec<(String, Record)> = Vec::new();
        let mut touched: HashSet<String> = HashSet::new();
        let mut overtaken: BTreeSet<String> = BTreeSet::new();
        let wait = Move::Act(Action::of("wait"));
        for lid in &order {
            let mv = moves.get(lid).unwrap_or(&wait);
            let lab = &self.world.labs[lid.as_str()];
            if let Move::Act(a) = mv {
                if lab.finished && a.kind() == Some("wait") {
                    results.insert(lid.clone(), ActionResult { ok: true, code: "ok".into(), message: "finished".into() });
                    continue;
                }
            }
            self.world.labs.get_mut(lid.as_str()).expect("a lab").actions += 1;
            let applied: Result<(Outcome, &Action, Vec<f64>), (ActionError, Option<&Action>)> = match mv {
                Move::Rejected { code, message } => {
                    records.push((lid.clone(), vec![("rejected".into(), PyValue::Str(code.clone())),
                                                    ("message".into(), PyValue::Str(message.clone()))]));
                    Err((ActionError::new(code, message.clone()), None))
                }
                Move::Act(a) => match action_record(a) {
                    Err(e) => {
                        records.push((lid.clone(), vec![("rejected".into(), PyValue::Str(e.code.clone())),
                                                        ("message".into(), PyValue::Str(e.message.clone()))]));
                        Err((e, None))
                    }
                    Ok(record) => {
                        records.push((lid.clone(), record));
                        let budgets: Vec<f64> = self.world.labs.values().map(|l| l.budget).collect();
                        match apply_action(&mut self.world, lid, a) {
                            Ok(outcome) => Ok((outcome, a, budgets)),
                            Err(e) => Err((e, Some(a))),
                        }
                    }
                },
            };
            match applied {
                Err((e, action)) => {
                    self.world.labs.get_mut(lid.as_str()).expect("a lab").last_signature = None;
                    if let Some(a) = action {
                        if CONFLICT_CODES.contains(&e.code.as_str())
                            && !touched.is_disjoint(&referenced_ids(&self.world, lid, a))
                        {
                            results.insert(lid.clone(), ActionResult {
                                ok: false, code: e.code.clone(),
                                message: format!("conflict with an earlier move this round: {}", text(&e.message)),
                            });
                            overtaken.insert(lid.clone());
                            continue;
                        }
                    }
                    results.insert(lid.clone(), ActionResult { ok: false, code: e.code.clone(), message: text(&e.message) });
                    let lab = self.world.labs.get_mut(lid.as_str()).expect("a lab");
                    lab.invalid_actions += 1;
                    lab.reputation = f64::max(0.0, lab.reputation + REP_INVALID);
                    self.ledger.get_mut(lid.as_str()).expect("a ledger")[INVALID] -= PENALTY_INVALID;
                }
                Ok((outcome, a, budgets)) => {
                    touched.extend(referenced_ids(&self.world, lid, a));
                    for ((k, v), before) in self.world.labs.iter().zip(budgets) {
                        if v.budget != before {
                            touched.insert(budget_token(k));
                        }
                    }
                    results.insert(lid.clone(), ActionResult { ok: true, code: "ok".into(), message: outcome.note.clone() });
                    let record = records.last().expect("its record").1.clone();
                    self.spam_check(lid, a, &record);
                    if outcome.breaches != 0 {
                        self.ledger.get_mut(lid.as_str()).expect("a ledger")[BREACH] -=
                            PENALTY_BREACH * outcome.breaches as f64;
                    }
                    self.mark(outcome.category, outcome.affected.iter());
                }
            }
        }
        self.tick()?;
        let rewards = self.close_round();
        let round = self.world.round_index - 1;
        let mut sorted_results: Vec<(String, bool, String)> =
            results.iter().map(|(k, r)| (k.clone(), r.ok, r.code.clone())).collect();
        sorted_results.sort_by(|a, b| a.0.cmp(&b.0));
        let entry = RoundEntry {
            round,
            order: order.clone(),
            actions: records.iter()
                .map(|(lid, r)| (lid.clone(), standard_record(r, &results[lid.as_str()], overtaken.contains(lid))))
                .collect(),
            results: sorted_results,
            rewards: rewards.iter().map(|(lid, row)| (lid.clone(), py_round(row[10], 12))).collect(),
        };
        self.transcript.push(entry);
        self.last_results = results.clone();
        self.last_rewards = rewards.clone();
        Ok(RoundReport { round_index: round, order, results, rewards, done: self.world.done })
    }

    /// `_spam_check`: the same move twice in a row costs a spam penalty.
    fn spam_check(&mut self, lid: &str, action: &Action, record: &Record) {
        let kind = action.kind().unwrap_or("");
        let lab = self.world.labs.get_mut(lid).expect("a lab");
        if kind == "wait" || kind == "finish" {
            lab.last_signature = None;
            return;
        }
        let mut sig: Vec<(String, String)> = record.iter().map(|(k, v)| (k.clone(), v.repr())).collect();
        sig.sort();
        if lab.last_signature.as_ref() == Some(&sig) {
            self.ledger.get_mut(lid).expect("a ledger")[SPAM] -= PENALTY_SPAM;
            lab.reputation = f64::max(0.0, lab.reputation + crate::rules::limits::REP_SPAM);
        } else {
            lab.last_signature = Some(sig);
        }
    }

    /// `_tick`: the clock between rounds, each stage's potential change booked in its column.
    fn tick(&mut self) -> Result<(), String> {
        self.world.round_index += 1;
        let (affected, lapsed, breaches) = clock::start_blocks(&mut self.world);
        self.mark("time", affected.iter());
        for (lid, n) in &lapsed {
            self.ledger.get_mut(lid.as_str()).expect("a ledger")[SPAM] -= PENALTY_SPAM * *n as f64;
        }
        for (lid, n) in &breaches {
            self.ledger.get_mut(lid.as_str()).expect("a ledger")[BREACH] -= PENALTY_BREACH * *n as f64;
        }
        clock::expire(&mut self.world);
        let judged = auctions::resolve_auctions(&mut self.world, false).map_err(|e| format!("{e:?}"))?;
        self.mark("judge", judged.iter());
        let settled = clock::settle_due_jobs(&mut self.world);
        self.mark("allocation", settled.iter());
        let shocked = fire_due_shocks(&mut self.world).map_err(|e| format!("{e:?}"))?;
        self.mark("shock", shocked.iter());
        let finished = !self.controlled.is_empty()
            && self.controlled.iter().all(|c| self.world.labs[c.as_str()].finished);
        if self.world.round_index >= self.world.max_rounds || finished {
            let settled = clock::final_settlement(&mut self.world).map_err(|e| format!("{e:?}"))?;
            self.mark("allocation", settled.iter());
            let rest: Vec<String> = self.world.labs.keys().filter(|l| !settled.contains(*l)).cloned().collect();
            self.mark("allocation", rest.iter());
        }
        Ok(())
    }

    /// `_close_round`: each lab's reward row, penalties capped, summed exactly.
    fn close_round(&mut self) -> IndexMap<String, [f64; 11]> {
        let mut rewards = IndexMap::new();
        for (lid, led) in &self.ledger {
            let scale = self.world.reward_scale[lid.as_str()];
            let mut row = [0.0; 11];
            for c in 0..COMPONENTS {
                row[c] = led[c] / scale;
            }
            row[INVALID] = f64::max(-PENALTY_INVALID, led[INVALID]);
            row[SPAM] = f64::max(-SPAM_CAP, led[SPAM]);
            row[BREACH] = f64::max(-BREACH_CAP, led[BREACH]);
            let total = fsum(&row[..10]);
            row[10] = total;
            *self.returns.get_mut(lid.as_str()).expect("a return") += total;
            *self.penalties.get_mut(lid.as_str()).expect("a penalty") += row[INVALID] + row[SPAM] + row[BREACH];
            rewards.insert(lid.clone(), row);
        }
        rewards
    }
}
