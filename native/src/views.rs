//! What one seat may see, mirroring `gpu_arena.core.views`: plain owned values, immutable by
//! convention, whose field names are the Python views' field names (policies ported from Python
//! read them by the same names). `crate::observe` builds them; `SeatView::to_py` (or, reusing the
//! unchanged parts from one state to the next, `PyViewCache::seat_to_py`) turns one into the
//! Python core's frozen view objects so the Python side can hold the controlled seat's view.
//!
//! Mappings are `IndexMap`s because the Python views' `ReadOnlyDict`s keep insertion order and
//! callers iterate them; sequences are `Vec`s where Python has tuples. Statuses are the Python
//! strings, as in the views.

use std::collections::HashMap;
use std::hash::Hash;

use indexmap::IndexMap;
use pyo3::once_cell::GILOnceCell;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::value::{format_float, is_py_space, repr_float, repr_str};

/// `JobView`.
#[derive(Clone, Debug, PartialEq)]
pub struct JobView {
    pub job_id: String,
    pub gpu_hours_required: i64,
    pub deadline_round: i64,
    pub value: f64,
    pub min_reliability: f64,
    pub partial_credit: f64,
    pub pooled: bool,
    pub status: String,
    pub assigned_hours: i64,
    pub realized_value: f64,
    pub coalition_id: Option<String>,
    pub share: f64,
}

/// `BlockView`: `job_id`, `reserved_for`, `coalition_id`, `no_resale`, `must_allocate` and
/// `best_job` are only filled for the seat's own blocks; `marginal_value` is an aid.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockView {
    pub block_id: String,
    pub owner: Option<String>,
    pub gpu_count: i64,
    pub start_round: i64,
    pub duration: i64,
    pub end_round: i64,
    pub gpu_hours: i64,
    pub reliability: f64,
    pub energy_cost: f64,
    pub status: String,
    pub tradeable: bool,
    pub job_id: Option<String>,
    pub reserved_for: Option<String>,
    pub coalition_id: Option<String>,
    pub no_resale: bool,
    pub must_allocate: bool,
    pub marginal_value: Option<f64>,
    pub best_job: Option<String>,
}

/// `OfferView`.
#[derive(Clone, Debug, PartialEq)]
pub struct OfferView {
    pub offer_id: String,
    pub sender: String,
    pub target: String,
    /// `incoming` or `outgoing`.
    pub direction: String,
    pub block_ids: Vec<String>,
    pub requested_block_ids: Vec<String>,
    pub payment: f64,
    pub requested_payment: f64,
    pub created_round: i64,
    pub expires_round: i64,
    pub conditions: IndexMap<String, bool>,
    pub message: String,
    pub status: String,
    pub parent_offer_id: Option<String>,
    pub value_to_me: f64,
}

/// `CoalitionView`.
#[derive(Clone, Debug, PartialEq)]
pub struct CoalitionView {
    pub coalition_id: String,
    pub proposer: String,
    pub members: Vec<String>,
    pub job_id: String,
    pub gpu_hours_required: i64,
    pub deadline_round: i64,
    pub commitments: IndexMap<String, Vec<String>>,
    pub payment: f64,
    pub shares: IndexMap<String, f64>,
    pub expires_round: i64,
    pub consented: Vec<String>,
    pub status: String,
    pub pooled_hours: i64,
    pub breaches: Vec<String>,
    pub excused: Vec<String>,
    pub created_round: i64,
}

/// `LabView`.
#[derive(Clone, Debug, PartialEq)]
pub struct LabView {
    pub lab_id: String,
    pub budget: f64,
    pub reputation: f64,
    pub n_blocks: i64,
    pub finished: bool,
}

/// `MessageView`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MessageView {
    pub round_index: i64,
    pub sender: String,
    pub target: Option<String>,
    pub text: String,
}

/// `EventView`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EventView {
    pub round_index: i64,
    pub kind: String,
    pub text: String,
}

/// `PitchView`.
#[derive(Clone, Debug, PartialEq)]
pub struct PitchView {
    pub lab_id: String,
    pub bid: f64,
    pub job_id: Option<String>,
    pub message: String,
    pub round_index: i64,
    pub counter_to: Option<String>,
    pub score: Option<f64>,
    pub reasons: Vec<String>,
}

/// `AuctionView`.
#[derive(Clone, Debug, PartialEq)]
pub struct AuctionView {
    pub auction_id: String,
    pub block_id: String,
    pub opened_round: i64,
    pub close_round: i64,
    pub status: String,
    pub pitches: Vec<PitchView>,
    pub winner: Option<String>,
    pub price: f64,
}

/// `PooledJobView`: a public call for pooled capacity (hours and timing public, value not).
#[derive(Clone, Debug, PartialEq)]
pub struct PooledJobView {
    pub job_id: String,
    pub owner: String,
    pub gpu_hours_required: i64,
    pub deadline_round: i64,
    pub min_reliability: f64,
    pub status: String,
}

/// `MarketView`.
#[derive(Clone, Debug, PartialEq)]
pub struct MarketView {
    pub blocks: Vec<BlockView>,
    pub auctions: Vec<AuctionView>,
    pub pooled_jobs: Vec<PooledJobView>,
    pub events: Vec<EventView>,
}

/// `ResultView`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultView {
    pub ok: bool,
    pub code: String,
    pub message: String,
}

/// `SeatView`: one seat's observation.
#[derive(Clone, Debug, PartialEq)]
pub struct SeatView {
    pub task: String,
    pub split: String,
    pub round_index: i64,
    pub max_rounds: i64,
    pub controlled_lab_id: String,
    pub controlled_lab_budget: f64,
    pub controlled_lab_reputation: f64,
    pub private_jobs: Vec<JobView>,
    pub owned_blocks: Vec<BlockView>,
    pub public_market: MarketView,
    pub visible_labs: Vec<LabView>,
    pub active_offers: Vec<OfferView>,
    pub active_coalitions: Vec<CoalitionView>,
    pub message_history: Vec<MessageView>,
    pub last_action_result: ResultView,
    pub batna: f64,
    pub surplus_over_batna: f64,
    pub best_plan: IndexMap<String, Vec<String>>,
    pub reward_scale: f64,
    pub reward: f64,
    pub reward_breakdown: IndexMap<String, f64>,
    pub done: bool,
}

/// `f"{x:{spec}}"` for the specs `render_text` uses (all of which `format_float` supports).
fn fmt(x: f64, spec: &str) -> String {
    format_float(x, spec).expect("a supported format spec")
}

/// `f"{ids or '-'}"` of a tuple of ids: its repr, or `-` where it is empty.
fn ids_or_dash(ids: &[String]) -> String {
    match ids {
        [] => "-".to_string(),
        [one] => format!("({},)", repr_str(one)),
        _ => format!("({})", ids.iter().map(|x| repr_str(x)).collect::<Vec<_>>().join(", ")),
    }
}

/// The last `n` items of `xs` (`xs[-n:]`).
fn last<T>(xs: &[T], n: usize) -> &[T] {
    &xs[xs.len().saturating_sub(n)..]
}

/// `render_text`: a compact, complete plain-text rendering of a view (for people and as a
/// prompt base), character for character the Python one's.
pub fn render_text(view: &SeatView) -> String {
    let mut lines = vec![
        format!(
            "[{}/{}] round {}/{} - you are {} - budget {} - reputation {}",
            view.task, view.split, view.round_index, view.max_rounds, view.controlled_lab_id,
            fmt(view.controlled_lab_budget, ".2f"), fmt(view.controlled_lab_reputation, ".2f")
        ),
        format!("no-trade utility (BATNA) {}; surplus so far {}", fmt(view.batna, ".2f"), fmt(view.surplus_over_batna, "+.2f")),
        "Your jobs:".to_string(),
    ];
    for j in &view.private_jobs {
        lines.push(format!(
            "  {}: {} GPU-h by round {}, value {}, min reliability {}, partial credit {}, assigned {} h, {}{}",
            j.job_id, j.gpu_hours_required, j.deadline_round, fmt(j.value, ".2f"), repr_float(j.min_reliability),
            repr_float(j.partial_credit), j.assigned_hours, j.status, if j.pooled { " [pooled]" } else { "" }
        ));
    }
    lines.push("Your blocks:".to_string());
    for b in &view.owned_blocks {
        let mv = b.marginal_value.map(|m| format!(", worth {} to you", fmt(m, ".2f"))).unwrap_or_default();
        // `if b.job_id`: an empty id counts as none
        let job = match &b.job_id {
            Some(j) if !j.is_empty() => format!(" -> {j}"),
            _ => String::new(),
        };
        lines.push(format!(
            "  {}: {} GPUs rounds [{},{}) rel {} energy {}/GPU-h, {}{}{}",
            b.block_id, b.gpu_count, b.start_round, b.end_round, repr_float(b.reliability), repr_float(b.energy_cost),
            b.status, job, mv
        ));
    }
    if !view.best_plan.is_empty() {
        let plan: Vec<String> = view.best_plan.iter().map(|(j, bs)| format!("{} <- {}", j, bs.join(", "))).collect();
        lines.push(format!("Best allocation of what you hold: {}", plan.join("; ")));
    }
    lines.push("Market blocks:".to_string());
    for b in &view.public_market.blocks {
        let mv = b.marginal_value.map(|m| format!(", worth {} to you", fmt(m, ".2f"))).unwrap_or_default();
        lines.push(format!(
            "  {} ({}): {} GPUs rounds [{},{}) rel {} energy {}, {}{}",
            b.block_id, b.owner.as_deref().unwrap_or("None"), b.gpu_count, b.start_round, b.end_round,
            repr_float(b.reliability), repr_float(b.energy_cost), b.status, mv
        ));
    }
    for p in &view.public_market.pooled_jobs {
        lines.push(format!(
            "Pooled call: {} needs {} GPU-h by round {} ({})",
            p.owner, p.gpu_hours_required, p.deadline_round, p.job_id
        ));
    }
    for a in &view.public_market.auctions {
        let bids: Vec<String> = a.pitches.iter().map(|p| format!("{} {}", p.lab_id, fmt(p.bid, ".2f"))).collect();
        let bids = if bids.is_empty() { "no pitches".to_string() } else { bids.join(", ") };
        lines.push(format!("Auction {} for {}, closes round {}, {}: {}", a.auction_id, a.block_id, a.close_round, a.status, bids));
    }
    let labs: Vec<String> = view
        .visible_labs
        .iter()
        .map(|x| {
            format!(
                "{} budget {} rep {}{}",
                x.lab_id, fmt(x.budget, ".2f"), fmt(x.reputation, ".2f"), if x.finished { " (finished)" } else { "" }
            )
        })
        .collect();
    lines.push(format!("Labs: {}", labs.join("; ")));
    for o in &view.active_offers {
        lines.push(format!(
            "Offer {} {} {}->{}: gives {} for {}, pays {}, asks {}, expires round {}, worth {} to you",
            o.offer_id, o.direction, o.sender, o.target, ids_or_dash(&o.block_ids), ids_or_dash(&o.requested_block_ids),
            fmt(o.payment, ".2f"), fmt(o.requested_payment, ".2f"), o.expires_round, fmt(o.value_to_me, "+.2f")
        ));
    }
    for c in &view.active_coalitions {
        lines.push(format!(
            "Coalition {} ({}) for {}: members {}, consented {}",
            c.coalition_id, c.status, c.job_id, c.members.join(", "), c.consented.join(", ")
        ));
    }
    for e in last(&view.public_market.events, 5) {
        lines.push(format!("Event r{}: {}", e.round_index, e.text));
    }
    for m in last(&view.message_history, 5) {
        // `m.target or 'all'`: an empty target reads as all
        let target = match &m.target {
            Some(t) if !t.is_empty() => t.as_str(),
            _ => "all",
        };
        lines.push(format!("Msg r{} {}->{}: {}", m.round_index, m.sender, target, m.text));
    }
    let res = &view.last_action_result;
    let head = if res.ok { "ok".to_string() } else { format!("ERROR {}", res.code) };
    let last_line = format!("Last action: {} {}", head, res.message);
    lines.push(last_line.trim_end_matches(is_py_space).to_string());
    lines.join("\n")
}

/// The Python view classes, looked up once per process.
struct Classes {
    read_only_dict: PyObject,
    job: PyObject,
    block: PyObject,
    offer: PyObject,
    coalition: PyObject,
    lab: PyObject,
    message: PyObject,
    event: PyObject,
    pitch: PyObject,
    auction: PyObject,
    pooled_job: PyObject,
    market: PyObject,
    result: PyObject,
    seat: PyObject,
}

static CLASSES: GILOnceCell<Classes> = GILOnceCell::new();

impl Classes {
    fn get(py: Python) -> PyResult<&'static Classes> {
        if let Some(c) = CLASSES.get(py) {
            return Ok(c);
        }
        let m = py.import("gpu_arena.core.views")?;
        let class = |name: &str| -> PyResult<PyObject> { Ok(m.getattr(name)?.into()) };
        let loaded = Classes {
            read_only_dict: class("ReadOnlyDict")?,
            job: class("JobView")?,
            block: class("BlockView")?,
            offer: class("OfferView")?,
            coalition: class("CoalitionView")?,
            lab: class("LabView")?,
            message: class("MessageView")?,
            event: class("EventView")?,
            pitch: class("PitchView")?,
            auction: class("AuctionView")?,
            pooled_job: class("PooledJobView")?,
            market: class("MarketView")?,
            result: class("ResultView")?,
            seat: class("SeatView")?,
        };
        let _ = CLASSES.set(py, loaded); // set by someone else meanwhile: theirs is the same
        Ok(CLASSES.get(py).expect("just set"))
    }

    /// A `ReadOnlyDict` filled from `items`.
    fn mapping<I>(&self, py: Python, items: I) -> PyResult<PyObject>
    where
        I: IntoIterator<Item = (PyObject, PyObject)>,
    {
        let d = PyDict::new(py);
        for (k, v) in items {
            d.set_item(k, v)?;
        }
        self.read_only_dict.call1(py, (d,))
    }
}

/// Exact equality for reusing a Python view: floats compare by their bits (0.0 is not -0.0,
/// which prints apart; a NaN never matches, so it is only rebuilt).
trait Same {
    fn same(&self, other: &Self) -> bool;
}

impl Same for f64 {
    fn same(&self, other: &Self) -> bool {
        self.to_bits() == other.to_bits() && !self.is_nan()
    }
}

impl Same for Option<f64> {
    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Some(a), Some(b)) => a.same(b),
            (None, None) => true,
            _ => false,
        }
    }
}

macro_rules! same_fields {
    ($ty:ty; eq: $($e:ident),*; bits: $($f:ident),*) => {
        impl Same for $ty {
            fn same(&self, other: &Self) -> bool {
                $(self.$e == other.$e &&)* $(self.$f.same(&other.$f) &&)* true
            }
        }
    };
}

same_fields!(BlockView; eq: block_id, owner, gpu_count, start_round, duration, end_round, gpu_hours, status, tradeable,
             job_id, reserved_for, coalition_id, no_resale, must_allocate, best_job;
             bits: reliability, energy_cost, marginal_value);
same_fields!(JobView; eq: job_id, gpu_hours_required, deadline_round, pooled, status, assigned_hours, coalition_id;
             bits: value, min_reliability, partial_credit, realized_value, share);
same_fields!(LabView; eq: lab_id, n_blocks, finished; bits: budget, reputation);
same_fields!(PooledJobView; eq: job_id, owner, gpu_hours_required, deadline_round, status; bits: min_reliability);

/// Python views of facts kept from one conversion to the next (as the Python `ViewCache` keeps
/// them from one state to the next): a fact's Python view is built again only when its Rust view
/// changed, since building a frozen Python view costs far more than comparing two Rust ones. One
/// per episode (or per seat); it holds one entry per block and side, job, lab, pooled call,
/// message and event of its world.
#[derive(Default)]
pub struct PyViewCache {
    /// (the seat's own block?, block id) -> last view
    blocks: HashMap<(bool, String), (BlockView, PyObject)>,
    jobs: HashMap<String, (JobView, PyObject)>,
    labs: HashMap<String, (LabView, PyObject)>,
    pooled: HashMap<String, (PooledJobView, PyObject)>,
    events: HashMap<EventView, PyObject>,
    messages: HashMap<MessageView, PyObject>,
    /// false (`PyViewCache::default()`): a one-off conversion that keeps nothing
    keep: bool,
}

/// `map[key]`'s Python view if its Rust view is exactly `view`, else a new one (kept).
fn reuse<K: Hash + Eq, V: Same + Clone>(
    keep: bool,
    map: &mut HashMap<K, (V, PyObject)>,
    key: impl FnOnce() -> K,
    view: &V,
    build: impl FnOnce() -> PyResult<PyObject>,
) -> PyResult<PyObject> {
    if !keep {
        return build();
    }
    let key = key();
    if let Some((old, obj)) = map.get(&key) {
        if old.same(view) {
            return Ok(obj.clone());
        }
    }
    let obj = build()?;
    map.insert(key, (view.clone(), obj.clone()));
    Ok(obj)
}

/// `reuse` for views that are their own key (no floats: `==` is exact).
fn reuse_keyed<V: Hash + Eq + Clone>(
    keep: bool,
    map: &mut HashMap<V, PyObject>,
    view: &V,
    build: impl FnOnce() -> PyResult<PyObject>,
) -> PyResult<PyObject> {
    if !keep {
        return build();
    }
    if let Some(obj) = map.get(view) {
        return Ok(obj.clone());
    }
    let obj = build()?;
    map.insert(view.clone(), obj.clone());
    Ok(obj)
}

fn strs(py: Python, xs: &[String]) -> PyObject {
    PyTuple::new(py, xs.iter().map(|x| x.as_str())).into()
}

fn tuple(py: Python, xs: Vec<PyObject>) -> PyObject {
    PyTuple::new(py, xs).into()
}

impl JobView {
    fn to_py_with(&self, py: Python, c: &Classes) -> PyResult<PyObject> {
        let args = (
            self.job_id.as_str(), self.gpu_hours_required, self.deadline_round, self.value,
            self.min_reliability, self.partial_credit, self.pooled, self.status.as_str(),
            self.assigned_hours, self.realized_value, self.coalition_id.as_deref(), self.share,
        );
        c.job.call1(py, args)
    }
}

impl BlockView {
    fn to_py_with(&self, py: Python, c: &Classes) -> PyResult<PyObject> {
        let args = PyTuple::new(py, [
            self.block_id.to_object(py), self.owner.to_object(py), self.gpu_count.to_object(py),
            self.start_round.to_object(py), self.duration.to_object(py), self.end_round.to_object(py),
            self.gpu_hours.to_object(py), self.reliability.to_object(py), self.energy_cost.to_object(py),
            self.status.to_object(py), self.tradeable.to_object(py), self.job_id.to_object(py),
            self.reserved_for.to_object(py), self.coalition_id.to_object(py), self.no_resale.to_object(py),
            self.must_allocate.to_object(py), self.marginal_value.to_object(py), self.best_job.to_object(py),
        ]);
        c.block.call1(py, args)
    }
}

impl OfferView {
    fn to_py_with(&self, py: Python, c: &Classes) -> PyResult<PyObject> {
        let conditions = c.mapping(py, self.conditions.iter().map(|(k, v)| (k.to_object(py), v.to_object(py))))?;
        let args = PyTuple::new(py, [
            self.offer_id.to_object(py), self.sender.to_object(py), self.target.to_object(py),
            self.direction.to_object(py), strs(py, &self.block_ids), strs(py, &self.requested_block_ids),
            self.payment.to_object(py), self.requested_payment.to_object(py), self.created_round.to_object(py),
            self.expires_round.to_object(py), conditions, self.message.to_object(py), self.status.to_object(py),
            self.parent_offer_id.to_object(py), self.value_to_me.to_object(py),
        ]);
        c.offer.call1(py, args)
    }
}

impl CoalitionView {
    fn to_py_with(&self, py: Python, c: &Classes) -> PyResult<PyObject> {
        let commitments = c.mapping(py, self.commitments.iter().map(|(k, v)| (k.to_object(py), strs(py, v))))?;
        let shares = c.mapping(py, self.shares.iter().map(|(k, v)| (k.to_object(py), v.to_object(py))))?;
        let args = PyTuple::new(py, [
            self.coalition_id.to_object(py), self.proposer.to_object(py), strs(py, &self.members),
            self.job_id.to_object(py), self.gpu_hours_required.to_object(py), self.deadline_round.to_object(py),
            commitments, self.payment.to_object(py), shares, self.expires_round.to_object(py),
            strs(py, &self.consented), self.status.to_object(py), self.pooled_hours.to_object(py),
            strs(py, &self.breaches), strs(py, &self.excused), self.created_round.to_object(py),
        ]);
        c.coalition.call1(py, args)
    }
}

impl PitchView {
    fn to_py_with(&self, py: Python, c: &Classes) -> PyResult<PyObject> {
        let args = PyTuple::new(py, [
            self.lab_id.to_object(py), self.bid.to_object(py), self.job_id.to_object(py),
            self.message.to_object(py), self.round_index.to_object(py), self.counter_to.to_object(py),
            self.score.to_object(py), strs(py, &self.reasons),
        ]);
        c.pitch.call1(py, args)
    }
}

impl AuctionView {
    fn to_py_with(&self, py: Python, c: &Classes) -> PyResult<PyObject> {
        let pitches = self.pitches.iter().map(|p| p.to_py_with(py, c)).collect::<PyResult<Vec<_>>>()?;
        let args = PyTuple::new(py, [
            self.auction_id.to_object(py), self.block_id.to_object(py), self.opened_round.to_object(py),
            self.close_round.to_object(py), self.status.to_object(py), tuple(py, pitches),
            self.winner.to_object(py), self.price.to_object(py),
        ]);
        c.auction.call1(py, args)
    }
}

impl PyViewCache {
    /// An empty cache that keeps the views it builds.
    pub fn new() -> Self {
        PyViewCache { keep: true, ..Default::default() }
    }

    fn block(&mut self, py: Python, c: &Classes, own: bool, b: &BlockView) -> PyResult<PyObject> {
        reuse(self.keep, &mut self.blocks, || (own, b.block_id.clone()), b, || b.to_py_with(py, c))
    }

    fn market(&mut self, py: Python, c: &Classes, m: &MarketView) -> PyResult<PyObject> {
        let blocks = m.blocks.iter().map(|b| self.block(py, c, false, b)).collect::<PyResult<Vec<_>>>()?;
        let auctions = m.auctions.iter().map(|a| a.to_py_with(py, c)).collect::<PyResult<Vec<_>>>()?;
        let pooled = m
            .pooled_jobs
            .iter()
            .map(|p| {
                reuse(self.keep, &mut self.pooled, || p.job_id.clone(), p, || {
                    let args = (p.job_id.as_str(), p.owner.as_str(), p.gpu_hours_required, p.deadline_round,
                                p.min_reliability, p.status.as_str());
                    c.pooled_job.call1(py, args)
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let events = m
            .events
            .iter()
            .map(|e| {
                reuse_keyed(self.keep, &mut self.events, e, || {
                    c.event.call1(py, (e.round_index, e.kind.as_str(), e.text.as_str()))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let args = (tuple(py, blocks), tuple(py, auctions), tuple(py, pooled), tuple(py, events));
        c.market.call1(py, args)
    }

    /// The Python core's `SeatView` holding the same values as `view`, built as `observe` builds
    /// it (tuples for sequences, `ReadOnlyDict`s for mappings), reusing the Python views of facts
    /// that did not change since an earlier call.
    pub fn seat_to_py(&mut self, py: Python, view: &SeatView) -> PyResult<PyObject> {
        let c = Classes::get(py)?;
        let keep = self.keep;
        let jobs = view
            .private_jobs
            .iter()
            .map(|j| reuse(keep, &mut self.jobs, || j.job_id.clone(), j, || j.to_py_with(py, c)))
            .collect::<PyResult<Vec<_>>>()?;
        let owned = view.owned_blocks.iter().map(|b| self.block(py, c, true, b)).collect::<PyResult<Vec<_>>>()?;
        let market = self.market(py, c, &view.public_market)?;
        let labs = view
            .visible_labs
            .iter()
            .map(|l| {
                reuse(keep, &mut self.labs, || l.lab_id.clone(), l, || {
                    c.lab.call1(py, (l.lab_id.as_str(), l.budget, l.reputation, l.n_blocks, l.finished))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let offers = view.active_offers.iter().map(|x| x.to_py_with(py, c)).collect::<PyResult<Vec<_>>>()?;
        let coalitions = view.active_coalitions.iter().map(|x| x.to_py_with(py, c)).collect::<PyResult<Vec<_>>>()?;
        let messages = view
            .message_history
            .iter()
            .map(|m| {
                reuse_keyed(keep, &mut self.messages, m, || {
                    c.message.call1(py, (m.round_index, m.sender.as_str(), m.target.as_deref(), m.text.as_str()))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let r = &view.last_action_result;
        let result = c.result.call1(py, (r.ok, r.code.as_str(), r.message.as_str()))?;
        let best_plan = c.mapping(py, view.best_plan.iter().map(|(k, v)| (k.to_object(py), strs(py, v))))?;
        let breakdown = c.mapping(py, view.reward_breakdown.iter().map(|(k, v)| (k.to_object(py), v.to_object(py))))?;
        let args = PyTuple::new(py, [
            view.task.to_object(py), view.split.to_object(py), view.round_index.to_object(py),
            view.max_rounds.to_object(py), view.controlled_lab_id.to_object(py),
            view.controlled_lab_budget.to_object(py), view.controlled_lab_reputation.to_object(py),
            tuple(py, jobs), tuple(py, owned), market, tuple(py, labs), tuple(py, offers), tuple(py, coalitions),
            tuple(py, messages), result, view.batna.to_object(py), view.surplus_over_batna.to_object(py), best_plan,
            view.reward_scale.to_object(py), view.reward.to_object(py), breakdown, view.done.to_object(py),
        ]);
        c.seat.call1(py, args)
    }
}

impl SeatView {
    /// The Python core's `SeatView` holding the same values, every part built anew (see
    /// [`PyViewCache::seat_to_py`] for conversions that reuse the unchanged parts).
    pub fn to_py(&self, py: Python) -> PyResult<PyObject> {
        PyViewCache::default().seat_to_py(py, self)
    }
}
