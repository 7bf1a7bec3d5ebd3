//! The parameterised negotiator every scripted opponent shares, mirroring
//! `gpu_arena.policies.negotiator` (`Negotiator`, `run_energy`, `urgency_of`).
//!
//! It decides from its seat's view alone and keeps its own state across rounds (grudges, the
//! blocks it bid for, the labs that let its coalitions expire, its own `random.Random`). The five
//! archetypes (`super::archetypes`) are this negotiator with leaned parameters and a few steps of
//! their own, which `Negotiator::act` dispatches on [`Archetype`].
//!
//! Every number is computed with the Python expression's IEEE operations in its order, so a
//! threshold compared with an offer's value falls on the same side; the actions carry the Python
//! types (`float` payments, `int` expiries, tuples of ids) and the f-strings' text.

use std::collections::{HashMap, HashSet};

use crate::rng::PyRandom;
use crate::types::Action;
use crate::value::{ordered_sum, py_round, PyValue};
use crate::views::{BlockView, OfferView, PitchView, SeatView};

/// `EXPECTED_VALUE_PER_HOUR`: the public estimate of what an unannounced pooled job is worth per hour.
pub const EXPECTED_VALUE_PER_HOUR: f64 = 4.2;

/// `PLANNABLE`, by the view's status text.
fn plannable(status: &str) -> bool {
    status == "free" || status == "reserved"
}

/// `x or 0.0` for an optional float: None and both zeros read 0.0 (`-0.0` is falsy too).
pub(crate) fn or_zero(x: Option<f64>) -> f64 {
    match x {
        Some(v) if v != 0.0 => v,
        _ => 0.0,
    }
}

/// Python's truthiness of an optional string.
fn truthy(s: &Option<String>) -> bool {
    matches!(s, Some(t) if !t.is_empty())
}

/// `min(a, b)` as Python's builtin picks it (the first of equals, `b` only when strictly less).
pub(crate) fn py_min(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

/// `max(a, b)` as Python's builtin picks it (the first of equals, `b` only when strictly greater).
pub(crate) fn py_max(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}


/// `run_energy(blocks)`: the energy its owner pays to run `blocks`, energy price × GPU-hours each.
pub fn run_energy<'a>(blocks: impl IntoIterator<Item = &'a BlockView>) -> f64 {
    let costs: Vec<f64> = blocks.into_iter().map(|b| b.energy_cost * b.gpu_hours as f64).collect();
    ordered_sum(&costs)
}

/// `urgency_of(rounds_left)`: 0 when deadlines are far, toward 1 when the nearest is next round.
pub fn urgency_of(rounds_left: impl IntoIterator<Item = i64>) -> f64 {
    match rounds_left.into_iter().min() {
        None => 0.0,
        Some(least) => 1.0 / least.max(1) as f64,
    }
}

/// An exception a Python policy raises: `policy_move` turns it into the seat's lost move,
/// `RejectedAction("policy_error", f"{type(e).__name__}: {e}")`, which [`PolicyError`]'s
/// `Display` writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    /// the exception's class name
    pub kind: &'static str,
    pub message: String,
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for PolicyError {}

/// `math.floor(x)` / `int(x)` of a float as an integral float, or the exception Python raises
/// converting a non-finite float to an int.
fn to_int(x: f64) -> Result<f64, PolicyError> {
    if x.is_nan() {
        Err(PolicyError { kind: "ValueError", message: "cannot convert float NaN to integer".to_string() })
    } else if x.is_infinite() {
        Err(PolicyError { kind: "OverflowError", message: "cannot convert float infinity to integer".to_string() })
    } else {
        Ok(x)
    }
}

/// `Negotiator.cents`: a payment rounded down to the cent, never above the budget.
pub fn cents(amount: f64, budget: f64) -> Result<f64, PolicyError> {
    // floor() of a float is exactly the int Python's math.floor returns, and int / 100 is the
    // correctly rounded quotient, as f64 division is
    let floored = to_int((py_min(amount, budget) * 100.0).floor())?;
    Ok(py_max(0.0, floored / 100.0))
}

/// Which class of the Python hierarchy this negotiator is: the base, or the archetype whose
/// overridden steps `act` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Archetype {
    Negotiator,
    Cooperative,
    Selfish,
    DeadlinePanicked,
    Deceptive,
    Retaliatory,
}

impl Archetype {
    /// The registry name (`name` of the Python class).
    pub fn name(self) -> &'static str {
        match self {
            Archetype::Negotiator => "negotiator",
            Archetype::Cooperative => "cooperative",
            Archetype::Selfish => "selfish",
            Archetype::DeadlinePanicked => "deadline_panicked",
            Archetype::Deceptive => "deceptive",
            Archetype::Retaliatory => "retaliatory",
        }
    }

    /// The archetype registered as `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [Archetype::Negotiator, Archetype::Cooperative, Archetype::Selfish, Archetype::DeadlinePanicked,
         Archetype::Deceptive, Archetype::Retaliatory]
            .into_iter()
            .find(|a| a.name() == name)
    }
}

/// `Negotiator.__init__`'s parameters, at their Python defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NegotiatorParams {
    pub acceptance_margin: f64,
    pub deadline_sensitivity: f64,
    pub honesty: f64,
    pub coalition_trust: f64,
    pub retaliation_memory: f64,
    pub risk: f64,
}

impl Default for NegotiatorParams {
    fn default() -> Self {
        NegotiatorParams {
            acceptance_margin: 0.08,
            deadline_sensitivity: 1.0,
            honesty: 1.0,
            coalition_trust: 0.7,
            retaliation_memory: 3.0,
            risk: 0.5,
        }
    }
}

/// `Negotiator`: a scripted seat, with its parameters and the state it keeps across rounds.
#[derive(Clone, Debug)]
pub struct Negotiator {
    pub archetype: Archetype,
    pub rng: PyRandom,
    pub acceptance_margin: f64,
    pub deadline_sensitivity: f64,
    pub honesty: f64,
    pub coalition_trust: f64,
    pub retaliation_memory: f64,
    pub risk: f64,
    /// lab -> round until which it is refused
    pub grudges: HashMap<String, i64>,
    /// block -> how many times it offered for it
    pub asked: HashMap<String, i64>,
    /// labs that let one of its coalition proposals expire (a Python set: only membership is read)
    pub refusers: HashSet<String>,
    /// share of a pooled job's value a proposal must leave the proposer
    pub min_pool_gain: f64,
}

/// One step of the round: an action, nothing to do, or the exception Python would raise.
type Step = fn(&mut Negotiator, &SeatView) -> Result<Option<Action>, PolicyError>;

/// `Action(kind)`, its other fields at their defaults (each step then sets its keywords).
fn action(kind: &str) -> Action {
    Action::of(kind)
}

fn text(s: &str) -> PyValue {
    PyValue::Str(s.to_string())
}

fn opt_text(s: &Option<String>) -> PyValue {
    s.as_ref().map_or(PyValue::None, |t| text(t))
}

fn ids<'a>(xs: impl IntoIterator<Item = &'a String>) -> PyValue {
    PyValue::Tuple(xs.into_iter().map(|x| text(x)).collect())
}

impl Negotiator {
    /// `Negotiator(seed, **params)`; `rng` is `random.Random(seed)` (seeds may exceed an i64).
    pub fn new(archetype: Archetype, rng: PyRandom, p: &NegotiatorParams) -> Self {
        Negotiator {
            archetype,
            rng,
            acceptance_margin: p.acceptance_margin,
            deadline_sensitivity: p.deadline_sensitivity,
            honesty: p.honesty,
            coalition_trust: p.coalition_trust,
            retaliation_memory: p.retaliation_memory,
            risk: p.risk,
            grudges: HashMap::new(),
            asked: HashMap::new(),
            refusers: HashSet::new(),
            min_pool_gain: 0.0,
        }
    }

    // ------------------------------------------------------------------ valuations

    /// `Negotiator.stake`: the value of all its jobs (1.0 where that is zero).
    pub fn stake(&self, obs: &SeatView) -> f64 {
        let values: Vec<f64> = obs.private_jobs.iter().map(|j| j.value).collect();
        let total = ordered_sum(&values);
        if total == 0.0 {
            1.0
        } else {
            total
        }
    }

    /// `Negotiator.urgency`: 0 when deadlines are far, toward 1 when an open job's is next round.
    pub fn urgency(&self, obs: &SeatView) -> f64 {
        urgency_of(obs.private_jobs.iter().filter(|j| j.status == "open").map(|j| j.deadline_round - obs.round_index))
    }

    /// `Negotiator.threshold`: money a deal must gain this lab before it says yes.
    pub fn threshold(&self, obs: &SeatView, at_stake: f64) -> f64 {
        self.threshold_at(at_stake, self.urgency(obs))
    }

    /// `Negotiator.threshold_at`: [`Negotiator::threshold`] at a given urgency.
    pub fn threshold_at(&self, at_stake: f64, urgency: f64) -> f64 {
        let melt = 1.0 / (1.0 + self.deadline_sensitivity * urgency * 3.0);
        self.acceptance_margin * py_max(1.0, at_stake) * melt + 0.01
    }

    /// `Negotiator.at_stake`: the offer's blocks valued by this lab, what it gives plus what it gets.
    pub fn at_stake(&self, obs: &SeatView, offer: &OfferView) -> f64 {
        let mine: HashMap<&str, &BlockView> = obs.owned_blocks.iter().map(|b| (b.block_id.as_str(), b)).collect();
        let theirs: HashMap<&str, &BlockView> =
            obs.public_market.blocks.iter().map(|b| (b.block_id.as_str(), b)).collect();
        let incoming = offer.direction == "incoming";
        let (gives, gets) = if incoming {
            (&offer.requested_block_ids, &offer.block_ids)
        } else {
            (&offer.block_ids, &offer.requested_block_ids)
        };
        let value = |table: &HashMap<&str, &BlockView>, b: &String| table.get(b.as_str()).map_or(0.0, |v| or_zero(v.marginal_value));
        let given: Vec<f64> = gives.iter().map(|b| value(&mine, b)).collect();
        let got: Vec<f64> = gets.iter().map(|b| value(&theirs, b)).collect();
        ordered_sum(&given) + ordered_sum(&got)
    }

    /// `Negotiator.opening_share`: share of a block's value offered when buying.
    pub fn opening_share(&self, obs: &SeatView) -> f64 {
        self.opening_share_at(self.urgency(obs))
    }

    /// `Negotiator.opening_share_at`: [`Negotiator::opening_share`] at a given urgency.
    pub fn opening_share_at(&self, urgency: f64) -> f64 {
        py_min(0.95, self.risk * (1.0 + self.deadline_sensitivity * urgency))
    }

    /// `Negotiator.refuses`: whether it holds a grudge against `lab` this round.
    pub fn refuses(&self, obs: &SeatView, lab: &str) -> bool {
        self.retaliation_memory > 0.0 && self.grudges.get(lab).copied().unwrap_or(-1) >= obs.round_index
    }

    /// The round until which a lab it holds a grudge against is refused from now.
    fn grudge_until(&self, obs: &SeatView) -> Result<i64, PolicyError> {
        // int() truncates toward zero; a memory beyond i64 saturates (no round reaches it)
        Ok(obs.round_index.saturating_add(to_int(self.retaliation_memory.trunc())? as i64))
    }

    /// `Negotiator.remember`: new public breaches make grudges.
    pub fn remember(&mut self, obs: &SeatView) -> Result<(), PolicyError> {
        for e in &obs.public_market.events {
            if e.kind == "breach" && e.round_index >= obs.round_index - 1 {
                let culprit = e.text.split(' ').next().unwrap_or("");
                if culprit != obs.controlled_lab_id {
                    let until = self.grudge_until(obs)?;
                    self.grudges.insert(culprit.to_string(), until);
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ the round

    /// `act(observation)`: the first step that has something to do, else a wait (the deceptive
    /// archetype first considers walking out of a coalition: `DeceptivePolicy.act`).
    pub fn act(&mut self, obs: &SeatView) -> Result<Action, PolicyError> {
        if self.archetype == Archetype::Deceptive {
            if let Some(defect) = self.defect(obs) {
                return Ok(defect);
            }
        }
        self.remember(obs)?;
        // consents before offers: a proposal needs every member within its window, an offer
        // answered a round later usually still stands
        let steps: [Step; 7] = [
            |n, o| n.allocate_due(o), |n, o| n.answer_coalitions(o), Self::answer_offers, Self::pitch,
            Self::propose_coalition, Self::buy, Self::talk,
        ];
        for step in steps {
            if let Some(a) = step(self, obs)? {
                return Ok(a);
            }
        }
        Ok(action("wait"))
    }

    /// `Negotiator.allocate_due`: blocks of the best plan whose window opens next round.
    pub fn allocate_due(&self, obs: &SeatView) -> Result<Option<Action>, PolicyError> {
        let owned: HashMap<&str, &BlockView> = obs.owned_blocks.iter().map(|b| (b.block_id.as_str(), b)).collect();
        let mut due: Vec<&String> = obs
            .best_plan
            .values()
            .flatten()
            .filter(|b| {
                owned.get(b.as_str()).is_some_and(|o| plannable(&o.status) && o.start_round <= obs.round_index + 1)
            })
            .collect();
        if due.is_empty() {
            return Ok(None);
        }
        due.sort();
        let mut a = action("allocate_to_job");
        a.block_ids = ids(due);
        Ok(Some(a))
    }

    /// `Negotiator.fitting_job`: the job a block would serve in this seat's best plan.
    pub fn fitting_job(&self, _obs: &SeatView, block: &BlockView) -> Option<String> {
        block.best_job.clone()
    }

    /// `Negotiator.answer_offers` (with `RetaliatoryPolicy.answer_offers`' grudges first).
    pub fn answer_offers(&mut self, obs: &SeatView) -> Result<Option<Action>, PolicyError> {
        if self.archetype == Archetype::Retaliatory {
            for o in &obs.active_offers {
                // an offer worth less than nothing to it is an insult, remembered
                if o.direction == "incoming" && o.value_to_me < 0.0 {
                    let until = self.grudge_until(obs)?;
                    self.grudges.insert(o.sender.clone(), until);
                }
            }
        }
        // an offer whose sender can no longer pay it cannot settle; one whose asking price this
        // lab cannot pay may still settle as a counter
        let budgets: HashMap<&str, f64> = obs.visible_labs.iter().map(|l| (l.lab_id.as_str(), l.budget)).collect();
        let budget = obs.controlled_lab_budget;
        let affordable = |o: &OfferView| o.requested_payment <= budget + 1e-9;
        let mut best: Option<&OfferView> = None;
        for o in &obs.active_offers {
            let payable = o.payment <= budgets.get(o.sender.as_str()).copied().unwrap_or(0.0) + 1e-9;
            if o.direction != "incoming" || !payable {
                continue;
            }
            // max() keeps the first of equal keys: replace only on a strictly greater key
            let better = match best {
                None => true,
                Some(b) => {
                    let (fa, fb) = (affordable(o), affordable(b));
                    if fa != fb {
                        fa
                    } else if o.value_to_me != b.value_to_me {
                        o.value_to_me > b.value_to_me
                    } else {
                        o.offer_id > b.offer_id
                    }
                }
            };
            if better {
                best = Some(o);
            }
        }
        let Some(offer) = best else {
            return Ok(None);
        };
        if self.refuses(obs, &offer.sender) {
            let mut a = action("reject_offer");
            a.offer_id = text(&offer.offer_id);
            return Ok(Some(a));
        }
        let need = self.threshold(obs, self.at_stake(obs, offer));
        if offer.value_to_me >= need && affordable(offer) {
            let blocks: HashMap<&str, &BlockView> =
                obs.public_market.blocks.iter().map(|b| (b.block_id.as_str(), b)).collect();
            let mut job = None;
            for bid in &offer.block_ids {
                if let Some(b) = blocks.get(bid.as_str()) {
                    job = self.fitting_job(obs, b);
                    if truthy(&job) {
                        break;
                    }
                }
            }
            let mut a = action("accept_offer");
            a.offer_id = text(&offer.offer_id);
            a.job_id = opt_text(&job);
            return Ok(Some(a));
        }
        if offer.value_to_me < -0.25 * self.stake(obs) {
            // an offer that would cost it a quarter of its stake is exploitative
            let until = self.grudge_until(obs)?;
            self.grudges.insert(offer.sender.clone(), until);
        }
        if let Some(a) = self.counter(obs, offer, need)? {
            return Ok(Some(a));
        }
        let mut a = action("reject_offer");
        a.offer_id = text(&offer.offer_id);
        Ok(Some(a))
    }

    /// `Negotiator.counter`: mirror the offer's blocks and move the money by what is missing.
    pub fn counter(&self, obs: &SeatView, offer: &OfferView, need: f64) -> Result<Option<Action>, PolicyError> {
        let missing = need - offer.value_to_me;
        if missing <= 0.0 || offer.parent_offer_id.is_some() {
            return Ok(None);
        }
        let to_me = offer.payment - offer.requested_payment + missing; // money this lab needs to receive
        let (gives, gets) = (&offer.requested_block_ids, &offer.block_ids);
        let mut a = action("counter_offer");
        a.offer_id = text(&offer.offer_id);
        if to_me > 0.0 {
            if gives.is_empty() {
                return Ok(None); // blocks it would need to be paid to take are not worth a counter
            }
            let budget = obs.visible_labs.iter().find(|l| l.lab_id == offer.sender).map_or(0.0, |l| l.budget);
            if to_me > budget {
                return Ok(None);
            }
            a.block_ids = ids(gives);
            a.requested_block_ids = ids(gets);
            a.requested_payment = PyValue::Float(cents(to_me, budget)?);
            return Ok(Some(a));
        }
        let pay = cents(-to_me, obs.controlled_lab_budget)?;
        if pay <= 0.0 {
            return Ok(None);
        }
        a.block_ids = ids(gives);
        a.requested_block_ids = ids(gets);
        a.payment = PyValue::Float(pay);
        Ok(Some(a))
    }

    /// `Negotiator.answer_coalitions`: commit to a pending coalition that pays.
    pub fn answer_coalitions(&self, obs: &SeatView) -> Result<Option<Action>, PolicyError> {
        let me = &obs.controlled_lab_id;
        let owned: HashMap<&str, &BlockView> = obs.owned_blocks.iter().map(|b| (b.block_id.as_str(), b)).collect();
        for c in &obs.active_coalitions {
            if c.status != "proposed" || c.consented.contains(me) || !c.members.contains(me) {
                continue;
            }
            if self.refuses(obs, &c.proposer) {
                continue;
            }
            let mine: &[String] = c.commitments.get(me).map_or(&[], |v| v.as_slice());
            if mine.iter().any(|b| owned.get(b.as_str()).is_none_or(|o| !o.tradeable)) {
                continue;
            }
            let energy = run_energy(mine.iter().map(|b| owned[b.as_str()]));
            if energy > obs.controlled_lab_budget {
                continue; // it could not pay to run its share
            }
            // what its blocks are worth to its own jobs, plus the energy it pays to run them in the pool
            let values: Vec<f64> = mine.iter().map(|b| or_zero(owned[b.as_str()].marginal_value)).collect();
            let cost = ordered_sum(&values) + energy;
            let others = c.members.iter().filter(|m| **m != c.proposer).count();
            let paid = c.payment / others.max(1) as f64;
            // the pooled job's value is private: estimate it from its public hours
            let share = c.shares.get(me).copied().unwrap_or(0.0);
            let expected = share * c.gpu_hours_required as f64 * EXPECTED_VALUE_PER_HOUR;
            let reputation = obs.visible_labs.iter().find(|l| l.lab_id == c.proposer).map_or(0.5, |l| l.reputation);
            let trust = self.coalition_trust * (0.5 + reputation);
            if paid + trust * expected - cost >= self.threshold(obs, cost + trust * expected) {
                let mut a = action("commit_to_coalition");
                a.coalition_id = text(&c.coalition_id);
                return Ok(Some(a));
            }
        }
        Ok(None)
    }

    /// `Negotiator.pitch`: pitch for an open auction's block, or outbid the top pitch.
    pub fn pitch(&mut self, obs: &SeatView) -> Result<Option<Action>, PolicyError> {
        let me = &obs.controlled_lab_id;
        for a in &obs.public_market.auctions {
            if a.status != "open" || a.close_round <= obs.round_index {
                continue;
            }
            // a block it cannot value (none, or worth nothing to it) is not worth a pitch
            let Some(block) = obs.public_market.blocks.iter().find(|b| b.block_id == a.block_id) else {
                continue;
            };
            let value = or_zero(block.marginal_value);
            if value <= 0.0 {
                continue;
            }
            let mine = a.pitches.iter().find(|p| p.lab_id == *me);
            let mut top = None;
            for p in &a.pitches {
                if top.is_none_or(|t: &PitchView| p.bid > t.bid) {
                    top = Some(p);
                }
            }
            let bid = cents(value * self.opening_share(obs), obs.controlled_lab_budget)?;
            if mine.is_none() && top.is_none_or(|t| bid > t.bid) {
                let job = self.fitting_job(obs, block);
                let mut act = action("make_pitch");
                act.payment = PyValue::Float(bid);
                act.job_id = opt_text(&job);
                act.message = text(&self.pitch_text(obs, job.as_deref()));
                return Ok(Some(act));
            }
            if let Some(t) = top {
                if t.lab_id != *me && t.bid < value * 0.9 && t.bid + 1.0 <= obs.controlled_lab_budget {
                    let raise_to =
                        cents(py_min(value * 0.9, t.bid + py_max(1.0, 0.1 * value)), obs.controlled_lab_budget)?;
                    if raise_to > t.bid {
                        let mut act = action("counter_pitch");
                        act.target_lab_id = text(&t.lab_id);
                        act.payment = PyValue::Float(raise_to);
                        let job = self.fitting_job(obs, block);
                        act.message = text(&self.pitch_text(obs, job.as_deref()));
                        return Ok(Some(act));
                    }
                }
            }
        }
        Ok(None)
    }

    /// `Negotiator.pitch_text`: its job's needs, misreported with probability `1 - honesty`.
    pub fn pitch_text(&mut self, obs: &SeatView, job_id: Option<&str>) -> String {
        let job = match job_id.and_then(|id| obs.private_jobs.iter().find(|j| j.job_id == id)) {
            None => return "We can put this block to use.".to_string(),
            Some(j) => j,
        };
        let (mut hours, mut deadline) = (job.gpu_hours_required, job.deadline_round);
        if self.rng.random() >= self.honesty {
            // a deceptive claim
            hours *= 2;
            deadline = (obs.round_index + 1).max(deadline - 2);
        }
        format!("Our job needs {hours} GPU-hours by round {deadline}.")
    }

    /// `Negotiator.propose_coalition`: ask other labs for fitting blocks for an open pooled job.
    pub fn propose_coalition(&mut self, obs: &SeatView) -> Result<Option<Action>, PolicyError> {
        let me = &obs.controlled_lab_id;
        if obs.active_coalitions.iter().any(|c| {
            c.proposer == *me && matches!(c.status.as_str(), "proposed" | "formed" | "settled")
        }) {
            return Ok(None);
        }
        for c in &obs.active_coalitions {
            if c.proposer == *me && c.status == "expired" {
                // members who let an earlier proposal expire are not asked again
                for m in &c.members {
                    if !c.consented.contains(m) {
                        self.refusers.insert(m.clone());
                    }
                }
            }
        }
        let ttl: i64 = 3;
        for job in &obs.private_jobs {
            if !job.pooled || job.status != "open" || truthy(&job.coalition_id) {
                continue;
            }
            // only its own blocks that its plan already gives this job count
            let planned: HashSet<&str> =
                obs.best_plan.get(&job.job_id).map_or_else(HashSet::new, |v| v.iter().map(|s| s.as_str()).collect());
            let mine_hours: i64 = obs
                .owned_blocks
                .iter()
                .filter(|b| planned.contains(b.block_id.as_str()) && plannable(&b.status))
                .map(|b| b.gpu_hours)
                .sum();
            let need = job.gpu_hours_required - job.assigned_hours - mine_hours;
            if need <= 0 {
                continue;
            }
            let mut pool: Vec<&BlockView> = obs
                .public_market
                .blocks
                .iter()
                .filter(|b| {
                    b.tradeable
                        && b.owner.as_ref() != Some(me)
                        && b.start_round > obs.round_index + ttl + 1
                        && b.end_round <= job.deadline_round
                        && b.reliability >= job.min_reliability
                        && !self.refuses(obs, b.owner.as_deref().unwrap_or(""))
                        && b.owner.as_ref().is_none_or(|o| !self.refusers.contains(o))
                })
                .collect();
            pool.sort_by(|a, b| (-a.gpu_hours, &a.block_id).cmp(&(-b.gpu_hours, &b.block_id)));
            let mut chosen: Vec<&BlockView> = Vec::new();
            let mut got: i64 = 0;
            for b in pool {
                if got >= need {
                    break;
                }
                chosen.push(b);
                got += b.gpu_hours;
            }
            if chosen.is_empty() || got < need {
                continue; // a pool that cannot complete the job earns only partial credit
            }
            // sorted({b.owner for b in chosen}): tradeable blocks always have an owner
            let mut members: Vec<&String> = chosen.iter().filter_map(|b| b.owner.as_ref()).collect();
            members.sort();
            members.dedup();
            let total = job.gpu_hours_required as f64;
            let mut shares: Vec<(String, f64)> = members
                .iter()
                .map(|m| {
                    let hours: i64 = chosen.iter().filter(|b| b.owner.as_ref() == Some(*m)).map(|b| b.gpu_hours).sum();
                    ((*m).clone(), py_round(0.9 * hours as f64 / total, 6))
                })
                .collect();
            let given: Vec<f64> = shares.iter().map(|(_, s)| *s).collect();
            let own_share = py_round(1.0 - ordered_sum(&given), 6);
            shares.push((me.clone(), own_share));
            // it knows what its pooled job is worth: pay a tenth of it to win the members' consent
            let payment = cents(0.1 * job.value, obs.controlled_lab_budget * 0.5)?;
            if own_share * job.value - payment < self.min_pool_gain * job.value {
                continue; // what is left to it after shares and payment is not worth the risk
            }
            let mut a = action("form_coalition");
            a.job_id = text(&job.job_id);
            a.member_lab_ids = ids(members);
            a.requested_block_ids = ids(chosen.iter().map(|b| &b.block_id));
            a.shares = PyValue::Dict(shares.into_iter().map(|(k, v)| (PyValue::Str(k), PyValue::Float(v))).collect());
            a.payment = PyValue::Float(payment);
            a.expires_in = PyValue::Int(ttl);
            a.message = PyValue::Str(format!(
                "Pool capacity for {} GPU-hours by round {}.",
                job.gpu_hours_required, job.deadline_round
            ));
            return Ok(Some(a));
        }
        Ok(None)
    }

    /// `Negotiator.buy`: a buy offer for the market block worth most to it, one open bid at a time.
    pub fn buy(&mut self, obs: &SeatView) -> Result<Option<Action>, PolicyError> {
        let me = &obs.controlled_lab_id;
        if obs.active_offers.iter().any(|o| o.direction == "outgoing") {
            return Ok(None); // one open bid at a time: wait for the answer
        }
        let mut block: Option<&BlockView> = None;
        for b in &obs.public_market.blocks {
            let wanted = b.tradeable
                && b.owner.as_ref().is_some_and(|o| o != me)
                && b.marginal_value.unwrap_or(0.0) > 1.0
                && !self.refuses(obs, b.owner.as_deref().unwrap_or(""));
            if !wanted {
                continue;
            }
            // max() keeps the first of equal keys (marginal value, then id)
            let better = block.is_none_or(|k| {
                let (v, kv) = (b.marginal_value.unwrap_or(0.0), k.marginal_value.unwrap_or(0.0));
                if v != kv {
                    v > kv
                } else {
                    b.block_id > k.block_id
                }
            });
            if better {
                block = Some(b);
            }
        }
        let Some(block) = block else {
            return Ok(None);
        };
        let tries = self.asked.get(&block.block_id).copied().unwrap_or(0);
        if tries >= 3 {
            return Ok(None);
        }
        self.asked.insert(block.block_id.clone(), tries + 1);
        let share = py_min(0.95, self.opening_share(obs) + 0.15 * tries as f64);
        let price = cents(or_zero(block.marginal_value) * share, obs.controlled_lab_budget)?;
        if price <= 0.0 {
            return Ok(None);
        }
        let mut a = action("send_offer");
        a.target_lab_id = opt_text(&block.owner);
        a.requested_block_ids = ids([&block.block_id]);
        a.payment = PyValue::Float(price);
        a.job_id = opt_text(&self.fitting_job(obs, block));
        a.expires_in = PyValue::Int(2);
        Ok(Some(a))
    }

    /// `Negotiator.talk` (the base says nothing; `DeceptivePolicy.talk` inflates its demand).
    pub fn talk(&mut self, obs: &SeatView) -> Result<Option<Action>, PolicyError> {
        match self.archetype {
            Archetype::Deceptive => Ok(self.deceptive_talk(obs)),
            _ => Ok(None),
        }
    }
}
