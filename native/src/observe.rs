//! Building a seat's view of a world state, mirroring `gpu_arena.core.observe.observe`.
//!
//! The Python module prices aids lazily and keeps views from one state to the next (`SeatAids`,
//! `ViewCache`, `WorldIndex`); those are optimisations of the Python object model whose values
//! equal the eager computation's, so this port builds the eager view: every aid priced now
//! (`aids = true`) or none (`aids = false`). `WorldIndex` keeps only what every seat's view of
//! one state shares and costs a pass over the world: each job's valid hours and each lab's live
//! block count.

use std::collections::{HashMap, HashSet};

use indexmap::IndexMap;
use pyo3::prelude::*;

use crate::allocation::{BlockKey, FrontierCache};
use crate::types::{AuctionStatus, BlockStatus, CoalitionStatus, OfferStatus, World};
use crate::valuation::{member_share_value, LabValuer};
use crate::value::py_round;
use crate::views::{
    AuctionView, BlockView, CoalitionView, EventView, JobView, LabView, MarketView, MessageView, OfferView, PitchView,
    PooledJobView, PyViewCache, ResultView, SeatView,
};

/// `MESSAGE_HISTORY`.
pub const MESSAGE_HISTORY: usize = 20;
/// `EVENT_HISTORY`.
pub const EVENT_HISTORY: usize = 12;

/// `_PRICED`: market blocks the seat could still come to hold are priced for it.
fn priced_status(s: BlockStatus) -> bool {
    matches!(s, BlockStatus::Free | BlockStatus::Reserved | BlockStatus::Auction)
}

/// `_GONE`.
fn gone(s: BlockStatus) -> bool {
    matches!(s, BlockStatus::Done | BlockStatus::Idle | BlockStatus::Failed)
}

/// What every seat's view of one world state shares (the part of `WorldIndex` that is not a
/// cache of Python objects): valid hours per job (`valuation.valid_hours` of every job, in one
/// pass) and the number of each lab's blocks not gone. Build a new one after the world changes.
#[derive(Clone, Debug, Default)]
pub struct WorldIndex {
    pub hours: IndexMap<String, i64>,
    pub counts: HashMap<String, i64>,
}

impl WorldIndex {
    /// `WorldIndex(world)`'s hours and counts.
    pub fn new(world: &World) -> Self {
        let mut hours: IndexMap<String, i64> = world.jobs.keys().map(|k| (k.clone(), 0)).collect();
        let mut counts: HashMap<String, i64> = HashMap::new();
        for b in world.blocks.values() {
            if let Some(jid) = &b.job_id {
                if b.status.assigned() {
                    if let Some(job) = world.jobs.get(jid) {
                        if b.end_round() <= job.deadline_round && b.reliability >= job.min_reliability {
                            *hours.get_mut(jid).expect("every job has an entry") += b.hours();
                        }
                    }
                }
            }
            if let Some(owner) = &b.owner {
                if !gone(b.status) {
                    *counts.entry(owner.clone()).or_insert(0) += 1;
                }
            }
        }
        WorldIndex { hours, counts }
    }
}

/// `_OK`: the result a view shows when none is given.
pub fn ok_result() -> ResultView {
    ResultView { ok: true, code: "ok".to_string(), message: String::new() }
}

/// `observe(world, lab_id, last_result=, reward=, reward_breakdown=, aids=)`, eager: see
/// [`observe_with`] (this one gathers the index itself).
pub fn observe(
    world: &World,
    lab_id: &str,
    last_result: Option<&ResultView>,
    reward: f64,
    reward_breakdown: Option<&IndexMap<String, f64>>,
    aids: bool,
    frontiers: Option<FrontierCache>,
) -> SeatView {
    let index = WorldIndex::new(world);
    observe_with(world, &index, lab_id, last_result, reward, reward_breakdown, aids, frontiers)
}

/// `observe` with the state's [`WorldIndex`] already gathered (one per state serves every seat).
/// `aids` prices the decision aids (marginal values of blocks, values of offers); without them
/// they are None / 0.0, as in Python. `frontiers` is where the valuer keeps its solved problems
/// (an episode's cache, which `FrontierCache` shares by cloning; None: the shared one): prices
/// are the same either way.
#[allow(clippy::too_many_arguments)]
pub fn observe_with(
    world: &World,
    index: &WorldIndex,
    lab_id: &str,
    last_result: Option<&ResultView>,
    reward: f64,
    reward_breakdown: Option<&IndexMap<String, f64>>,
    aids: bool,
    frontiers: Option<FrontierCache>,
) -> SeatView {
    observe_priced(world, index, lab_id, last_result, reward, reward_breakdown, aids, frontiers, None)
}

/// The blocks of its own whose values a negotiator may read this turn: those an open offer of
/// its names and those it commits to a coalition (`Negotiator.at_stake`, `answer_coalitions`).
pub fn negotiator_reads(world: &World, lab_id: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    for o in world.offers.values() {
        if o.status == OfferStatus::Open && (o.sender == lab_id || o.target == lab_id) {
            ids.extend(o.block_ids.iter().cloned());
            ids.extend(o.requested_block_ids.iter().cloned());
        }
    }
    for c in world.coalitions.values() {
        if let Some(blocks) = c.commitments.get(lab_id) {
            ids.extend(blocks.iter().cloned());
        }
    }
    ids
}

/// [`observe_with`], pricing the values of its own blocks only for those in `owned` (None: all).
/// Python prices a policy's aids as it reads them; a Rust opponent's view, which never leaves
/// Rust, prices only the ones its policy can read ([`negotiator_reads`]): the others stay None,
/// and nobody reads them. Pricing an owned block is a second allocation program, the costliest aid.
#[allow(clippy::too_many_arguments)]
pub fn observe_priced(
    world: &World,
    index: &WorldIndex,
    lab_id: &str,
    last_result: Option<&ResultView>,
    reward: f64,
    reward_breakdown: Option<&IndexMap<String, f64>>,
    aids: bool,
    frontiers: Option<FrontierCache>,
    owned: Option<&HashSet<String>>,
) -> SeatView {
    let lab = &world.labs[lab_id];
    let r = world.round_index;
    let mut valuer = LabValuer::new(world, lab_id, None, frontiers);
    let (value, energy, assignment) = valuer.best();
    let assignment = assignment.clone();
    let base_net = value - energy; // as Plan.net

    let offers: Vec<_> = world
        .offers
        .values()
        .filter(|o| o.status == OfferStatus::Open && (o.sender == lab_id || o.target == lab_id))
        .collect();

    // aids: market block id -> (marginal value, best job); own block id -> marginal value;
    // offer values in the order of `offers`
    let mut market_prices: HashMap<&str, (f64, Option<String>)> = HashMap::new();
    let mut owned_values: HashMap<String, f64> = HashMap::new();
    let mut offer_values: Vec<f64> = Vec::with_capacity(offers.len());
    if aids {
        // SeatAids.market_prices: every priced market block, together, in world order
        let mut ids: Vec<&str> = Vec::new();
        let mut keys: Vec<BlockKey> = Vec::new();
        for b in world.blocks.values() {
            if b.owner.as_deref() != Some(lab_id) && b.start_round > r && priced_status(b.status) {
                let gpu_hours = b.hours();
                ids.push(&b.block_id);
                keys.push((gpu_hours, b.end_round(), b.reliability, b.energy_cost * gpu_hours as f64));
            }
        }
        for (bid, (net, job)) in ids.into_iter().zip(valuer.prices_of(&keys)) {
            let mv = net - base_net;
            market_prices.insert(bid, (mv, if mv > 1e-9 { job } else { None }));
        }
        // SeatAids.owned_values
        let own_ids: Vec<String> = valuer.blocks.iter().map(|b| b.block_id.clone()).collect();
        for (i, bid) in own_ids.into_iter().enumerate() {
            if owned.is_some_and(|wanted| !wanted.contains(&bid)) {
                continue;
            }
            let without = valuer.net_without(i);
            owned_values.insert(bid, base_net - without);
        }
        // SeatAids.offer, from the inputs observe gathers per offer
        for o in &offers {
            let incoming = o.target == lab_id;
            let (gets, gives) =
                if incoming { (&o.block_ids, &o.requested_block_ids) } else { (&o.requested_block_ids, &o.block_ids) };
            let gets_keys: Vec<(i64, BlockKey)> = gets
                .iter()
                .map(|x| {
                    let b = &world.blocks[x.as_str()];
                    let h = b.hours();
                    (b.start_round, (h, b.end_round(), b.reliability, b.energy_cost * h as f64))
                })
                .collect();
            let money = (o.payment - o.requested_payment) * if incoming { 1.0 } else { -1.0 };
            let gives: Vec<&str> = gives.iter().map(String::as_str).collect();
            offer_values.push(valuer.net_of(&gets_keys, &gives, money) - base_net + money);
        }
    }

    let mut owned = Vec::new();
    let mut market = Vec::new();
    for b in world.blocks.values() {
        let mine = b.owner.as_deref() == Some(lab_id);
        if !mine && gone(b.status) && b.start_round <= r {
            continue;
        }
        let tradeable = b.status == BlockStatus::Free && b.start_round > r;
        let mut view = BlockView {
            block_id: b.block_id.clone(),
            owner: b.owner.clone(),
            gpu_count: b.gpu_count,
            start_round: b.start_round,
            duration: b.duration,
            end_round: b.end_round(),
            gpu_hours: b.hours(),
            reliability: b.reliability,
            energy_cost: b.energy_cost,
            status: b.status.as_str().to_string(),
            tradeable,
            job_id: None,
            reserved_for: None,
            coalition_id: b.coalition_id.clone(),
            no_resale: b.no_resale,
            must_allocate: false,
            marginal_value: None,
            best_job: None,
        };
        if mine {
            view.job_id = b.job_id.clone();
            view.reserved_for = b.reserved_for.clone();
            view.must_allocate = b.must_allocate;
            view.marginal_value = owned_values.get(&b.block_id).copied();
            view.best_job = assignment.get(&b.block_id).cloned();
            owned.push(view);
        } else {
            if let Some((mv, job)) = market_prices.get(b.block_id.as_str()) {
                view.marginal_value = Some(*mv);
                view.best_job = job.clone();
            }
            market.push(view);
        }
    }

    let active_offers = offers
        .iter()
        .enumerate()
        .map(|(i, o)| OfferView {
            offer_id: o.offer_id.clone(),
            sender: o.sender.clone(),
            target: o.target.clone(),
            direction: if o.target == lab_id { "incoming" } else { "outgoing" }.to_string(),
            block_ids: o.block_ids.clone(),
            requested_block_ids: o.requested_block_ids.clone(),
            payment: o.payment,
            requested_payment: o.requested_payment,
            created_round: o.created_round,
            expires_round: o.expires_round,
            conditions: o.conditions.clone(),
            message: o.message.clone(),
            status: o.status.as_str().to_string(),
            parent_offer_id: o.parent_offer_id.clone(),
            value_to_me: if aids { offer_values[i] } else { 0.0 },
        })
        .collect();

    let mut coalitions = Vec::new();
    for c in world.coalitions.values() {
        let member = c.members.iter().any(|m| m == lab_id);
        if !member && c.status != CoalitionStatus::Formed {
            continue;
        }
        let job = &world.jobs[c.job_id.as_str()];
        coalitions.push(CoalitionView {
            coalition_id: c.coalition_id.clone(),
            proposer: c.proposer.clone(),
            members: c.members.clone(),
            job_id: c.job_id.clone(),
            gpu_hours_required: job.gpu_hours_required,
            deadline_round: job.deadline_round,
            commitments: if member { c.commitments.clone() } else { IndexMap::new() },
            payment: if member { c.payment } else { 0.0 },
            shares: if member { c.shares.clone() } else { IndexMap::new() },
            expires_round: c.expires_round,
            consented: c.consented.clone(), // kept sorted, as `tuple(sorted(c.consented))`
            status: c.status.as_str().to_string(),
            pooled_hours: if c.status == CoalitionStatus::Formed { index.hours[job.job_id.as_str()] } else { 0 },
            breaches: c.breaches.clone(),
            excused: c.excused.clone(),
            created_round: c.created_round,
        });
    }

    // the judge's score and reasons are checked against the pitcher's private job: a seat sees
    // them for its own pitch only
    let auctions = world
        .auctions
        .values()
        .filter(|a| a.status == AuctionStatus::Open || a.close_round >= r - 1)
        .map(|a| AuctionView {
            auction_id: a.auction_id.clone(),
            block_id: a.block_id.clone(),
            opened_round: a.opened_round,
            close_round: a.close_round,
            status: a.status.as_str().to_string(),
            pitches: a
                .pitches
                .values()
                .map(|p| {
                    let own = p.lab_id == lab_id;
                    PitchView {
                        lab_id: p.lab_id.clone(),
                        bid: p.bid,
                        job_id: if own { p.job_id.clone() } else { None },
                        message: p.message.clone(),
                        round_index: p.round_index,
                        counter_to: p.counter_to.clone(),
                        score: if own { p.score } else { None },
                        reasons: if own { p.reasons.clone() } else { Vec::new() },
                    }
                })
                .collect(),
            winner: a.winner.clone(),
            price: a.price,
        })
        .collect();

    let mut private_jobs = Vec::new();
    let mut pooled_jobs = Vec::new();
    for j in world.jobs.values() {
        if j.owner == lab_id {
            let share = match &j.coalition_id {
                Some(cid) if !cid.is_empty() => world.coalitions[cid.as_str()].shares.get(&j.owner).copied().unwrap_or(0.0),
                _ => 1.0,
            };
            private_jobs.push(JobView {
                job_id: j.job_id.clone(),
                gpu_hours_required: j.gpu_hours_required,
                deadline_round: j.deadline_round,
                value: j.value,
                min_reliability: j.min_reliability,
                partial_credit: j.partial_credit,
                pooled: j.pooled,
                status: j.status.as_str().to_string(),
                assigned_hours: index.hours[j.job_id.as_str()],
                realized_value: j.realized_value,
                coalition_id: j.coalition_id.clone(),
                share,
            });
        } else if j.pooled {
            pooled_jobs.push(PooledJobView {
                job_id: j.job_id.clone(),
                owner: j.owner.clone(),
                gpu_hours_required: j.gpu_hours_required,
                deadline_round: j.deadline_round,
                min_reliability: j.min_reliability,
                status: j.status.as_str().to_string(),
            });
        }
    }

    let events = world.events[world.events.len().saturating_sub(EVENT_HISTORY)..]
        .iter()
        .map(|e| EventView { round_index: e.round_index, kind: e.kind.clone(), text: e.text.clone() })
        .collect();
    let seen: Vec<_> = world
        .messages
        .iter()
        .filter(|m| m.target.is_none() || m.target.as_deref() == Some(lab_id) || m.sender == lab_id)
        .collect();
    let message_history = seen[seen.len().saturating_sub(MESSAGE_HISTORY)..]
        .iter()
        .map(|m| MessageView { round_index: m.round_index, sender: m.sender.clone(), target: m.target.clone(), text: m.text.clone() })
        .collect();
    let visible_labs = world
        .labs
        .values()
        .map(|x| LabView {
            lab_id: x.lab_id.clone(),
            budget: py_round(x.budget, 6),
            reputation: x.reputation,
            n_blocks: index.counts.get(&x.lab_id).copied().unwrap_or(0),
            finished: x.finished,
        })
        .collect();

    let phi = lab.budget + lab.realized_value + base_net + member_share_value(world, lab_id, Some(&index.hours));
    let mut best_plan: IndexMap<String, Vec<String>> = IndexMap::new();
    for (bid, jid) in assignment.iter() {
        best_plan.entry(jid.clone()).or_default().push(bid.clone());
    }
    SeatView {
        task: world.task.clone(),
        split: world.split.clone(),
        round_index: r,
        max_rounds: world.max_rounds,
        controlled_lab_id: lab_id.to_string(),
        controlled_lab_budget: lab.budget,
        controlled_lab_reputation: lab.reputation,
        private_jobs,
        owned_blocks: owned,
        public_market: MarketView { blocks: market, auctions, pooled_jobs, events },
        visible_labs,
        active_offers,
        active_coalitions: coalitions,
        message_history,
        last_action_result: last_result.cloned().unwrap_or_else(ok_result),
        batna: phi - lab.initial_budget,
        surplus_over_batna: phi - world.initial_potential.get(lab_id).copied().unwrap_or(phi),
        best_plan,
        reward_scale: world.reward_scale.get(lab_id).copied().unwrap_or(1.0),
        reward,
        reward_breakdown: reward_breakdown.cloned().unwrap_or_default(),
        done: world.done,
    }
}

/// Test hook: `observe(world, lab_id, aids=aids)` built in Rust, handed back as the Python
/// core's `SeatView`.
#[pyfunction]
fn observe_view(py: Python, world: &PyAny, lab_id: &str, aids: bool) -> PyResult<PyObject> {
    let w = crate::convert::read_world(world)?;
    if !w.labs.contains_key(lab_id) {
        return Err(pyo3::exceptions::PyKeyError::new_err(lab_id.to_string()));
    }
    observe(&w, lab_id, None, 0.0, None, aids, None).to_py(py)
}

/// Test hook: `observe(world, lab_id, last_result=ResultView(*last_result), reward=reward,
/// reward_breakdown=dict(reward_breakdown), aids=aids)` built in Rust, as the Python `SeatView`.
#[pyfunction]
fn observe_view_with(
    py: Python,
    world: &PyAny,
    lab_id: &str,
    aids: bool,
    last_result: Option<(bool, String, String)>,
    reward: f64,
    reward_breakdown: Option<Vec<(String, f64)>>,
) -> PyResult<PyObject> {
    let w = crate::convert::read_world(world)?;
    if !w.labs.contains_key(lab_id) {
        return Err(pyo3::exceptions::PyKeyError::new_err(lab_id.to_string()));
    }
    let result = last_result.map(|(ok, code, message)| ResultView { ok, code, message });
    let breakdown: Option<IndexMap<String, f64>> = reward_breakdown.map(|b| b.into_iter().collect());
    observe(&w, lab_id, result.as_ref(), reward, breakdown.as_ref(), aids, None).to_py(py)
}

/// Test hook: `render_text(observe(world, lab_id, aids=aids))`, all in Rust.
#[pyfunction]
fn render_view_text(world: &PyAny, lab_id: &str, aids: bool) -> PyResult<String> {
    let w = crate::convert::read_world(world)?;
    if !w.labs.contains_key(lab_id) {
        return Err(pyo3::exceptions::PyKeyError::new_err(lab_id.to_string()));
    }
    Ok(crate::views::render_text(&observe(&w, lab_id, None, 0.0, None, aids, None)))
}

/// Benchmark hook: reads `world` once, then `n` times builds `lab_id`'s view in Rust and, with
/// `convert`, turns it into the Python `SeatView` (the caller times the calls, with and without
/// `convert`, in CPU time). The valuer's frontiers come from the shared cache, as Python's
/// `observe` takes them by default.
#[pyfunction]
fn observe_bench(py: Python, world: &PyAny, lab_id: &str, aids: bool, n: usize, convert: bool) -> PyResult<()> {
    let w = crate::convert::read_world(world)?;
    if !w.labs.contains_key(lab_id) {
        return Err(pyo3::exceptions::PyKeyError::new_err(lab_id.to_string()));
    }
    for _ in 0..n {
        let view = observe(&w, lab_id, None, 0.0, None, aids, None);
        if convert {
            view.to_py(py)?;
        }
    }
    Ok(())
}

/// Test hook: `lab_id`'s view of each of `worlds` (the states of one episode, in order) as the
/// Python `SeatView`, converted through one [`PyViewCache`] (`cached`) or each anew.
#[pyfunction]
fn observe_views(py: Python, worlds: Vec<&PyAny>, lab_id: &str, aids: bool, cached: bool) -> PyResult<Vec<PyObject>> {
    let mut cache = if cached { PyViewCache::new() } else { PyViewCache::default() };
    let mut out = Vec::with_capacity(worlds.len());
    for world in worlds {
        let w = crate::convert::read_world(world)?;
        out.push(cache.seat_to_py(py, &observe(&w, lab_id, None, 0.0, None, aids, None))?);
    }
    Ok(out)
}

/// Benchmark hook: reads `worlds` (one episode's states) once, then `reps` times builds
/// `lab_id`'s view of each state in turn and converts it through one [`PyViewCache`] (`cached`)
/// or each anew (the caller times it in CPU time, against `reps = 0` for the reading).
#[pyfunction]
fn observe_bench_seq(py: Python, worlds: Vec<&PyAny>, lab_id: &str, aids: bool, reps: usize, cached: bool) -> PyResult<()> {
    let ws = worlds.into_iter().map(crate::convert::read_world).collect::<PyResult<Vec<_>>>()?;
    let mut cache = if cached { PyViewCache::new() } else { PyViewCache::default() };
    for _ in 0..reps {
        for w in &ws {
            cache.seat_to_py(py, &observe(w, lab_id, None, 0.0, None, aids, None))?;
        }
    }
    Ok(())
}

pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(observe_views, m)?)?;
    m.add_function(wrap_pyfunction!(observe_bench_seq, m)?)?;
    m.add_function(wrap_pyfunction!(observe_bench, m)?)?;
    m.add_function(wrap_pyfunction!(observe_view, m)?)?;
    m.add_function(wrap_pyfunction!(render_view_text, m)?)?;
    m.add_function(wrap_pyfunction!(observe_view_with, m)?)?;
    Ok(())
}
