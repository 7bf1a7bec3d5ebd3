//! The world's default opponents, mirroring `gpu_arena.policies`' scripted seats: the
//! [`negotiator::Negotiator`] base policy and its five [`archetypes`], plus the seat's own what-if
//! planner ([`planning`]).
//!
//! A policy decides from its seat's view alone (`core.policy.seat_view`: the negotiator
//! `uses_aids`, so it sees the view with the decision aids; lazy aids read the same values as
//! eager ones) and keeps its own state across rounds. For the tests, [`PyNegotiator`] is the
//! policy as a Python object that lives across an episode next to the Python one.

pub mod archetypes;
pub mod negotiator;
pub mod planning;
pub mod random;

use indexmap::IndexMap;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::allocation::FrontierCache;
use crate::observe::observe;
use crate::rng::PyRandom;
use crate::types::{Action, World};
use crate::views::*;

pub use archetypes::{make_negotiator, ARCHETYPES};
pub use negotiator::{Archetype, Negotiator, NegotiatorParams, PolicyError};
pub use planning::OwnPlanner;
pub use random::RandomPolicy;

/// `random.Random(seed)` for any int seed a policy gets (`world_seed` gives 64 unsigned bits).
pub fn seeded(seed: &PyAny) -> PyResult<PyRandom> {
    if let Ok(small) = seed.extract::<i64>() {
        return Ok(PyRandom::new(small));
    }
    let big: u128 = seed.call_method0("__abs__")?.extract()?;
    let words: Vec<u32> = (0..4).map(|i| (big >> (32 * i)) as u32).collect();
    Ok(PyRandom::from_seed_words(&words))
}

/// A core `Action` as the Python object (`gpu_arena.core.types.Action`), every field given.
pub fn action_to_py(py: Python, a: &Action) -> PyResult<PyObject> {
    let kwargs = PyDict::new(py);
    for (name, value) in [
        ("action_type", &a.action_type), ("target_lab_id", &a.target_lab_id), ("offer_id", &a.offer_id),
        ("coalition_id", &a.coalition_id), ("block_ids", &a.block_ids),
        ("requested_block_ids", &a.requested_block_ids), ("job_id", &a.job_id), ("payment", &a.payment),
        ("requested_payment", &a.requested_payment), ("message", &a.message), ("conditions", &a.conditions),
        ("member_lab_ids", &a.member_lab_ids), ("shares", &a.shares), ("expires_in", &a.expires_in),
    ] {
        kwargs.set_item(name, value.clone().into_py(py))?;
    }
    let cls = py.import("gpu_arena.core.types")?.getattr("Action")?;
    Ok(cls.call((), Some(kwargs))?.into())
}

/// `core.policy.seat_view` for a negotiator: it `uses_aids` (and never `needs_world`), so it sees
/// its seat's view with the decision aids. Python prices them lazily, as the policy reads them;
/// the eager view holds the same values. The last result, reward and breakdown are left at their
/// defaults: no negotiator reads them.
pub fn seat_view(world: &World, lab_id: &str, frontiers: Option<FrontierCache>) -> SeatView {
    observe(world, lab_id, None, 0.0, None, true, frontiers)
}

/// `policy_move`'s answer as Python's: the action, or the `RejectedAction("policy_error", ...)`
/// that stands for a move whose policy raised.
pub fn move_to_py(py: Python, chosen: Result<Action, PolicyError>) -> PyResult<PyObject> {
    match chosen {
        Ok(a) => action_to_py(py, &a),
        Err(e) => {
            let cls = py.import("gpu_arena.core.types")?.getattr("RejectedAction")?;
            Ok(cls.call1(("policy_error", e.to_string()))?.into())
        }
    }
}

// ------------------------------------------------------------ a Python view read (for the tests)

fn attr<'p, T: FromPyObject<'p>>(obj: &'p PyAny, name: &str) -> PyResult<T> {
    obj.getattr(name)?.extract()
}

fn strings(obj: &PyAny) -> PyResult<Vec<String>> {
    obj.iter()?.map(|x| x?.extract()).collect()
}

fn items<'p, T>(obj: &'p PyAny, read: impl Fn(&'p PyAny) -> PyResult<T>) -> PyResult<Vec<T>> {
    obj.iter()?.map(|x| read(x?)).collect()
}

fn mapping<'p, T>(obj: &'p PyAny, read: impl Fn(&'p PyAny) -> PyResult<T>) -> PyResult<IndexMap<String, T>> {
    let mut out = IndexMap::new();
    for pair in obj.call_method0("items")?.iter()? {
        let (k, v): (String, &PyAny) = pair?.extract()?;
        out.insert(k, read(v)?);
    }
    Ok(out)
}

fn read_block_view(b: &PyAny) -> PyResult<BlockView> {
    Ok(BlockView {
        block_id: attr(b, "block_id")?, owner: attr(b, "owner")?, gpu_count: attr(b, "gpu_count")?,
        start_round: attr(b, "start_round")?, duration: attr(b, "duration")?, end_round: attr(b, "end_round")?,
        gpu_hours: attr(b, "gpu_hours")?, reliability: attr(b, "reliability")?, energy_cost: attr(b, "energy_cost")?,
        status: attr(b, "status")?, tradeable: attr(b, "tradeable")?, job_id: attr(b, "job_id")?,
        reserved_for: attr(b, "reserved_for")?, coalition_id: attr(b, "coalition_id")?,
        no_resale: attr(b, "no_resale")?, must_allocate: attr(b, "must_allocate")?,
        marginal_value: attr(b, "marginal_value")?, best_job: attr(b, "best_job")?,
    })
}

/// A Python `SeatView` (with its aids) read into the Rust view: the policy's input isolated from
/// the view builder, so a difference found points at the policy.
pub fn read_seat_view(v: &PyAny) -> PyResult<SeatView> {
    let market = v.getattr("public_market")?;
    let result = v.getattr("last_action_result")?;
    Ok(SeatView {
        task: attr(v, "task")?,
        split: attr(v, "split")?,
        round_index: attr(v, "round_index")?,
        max_rounds: attr(v, "max_rounds")?,
        controlled_lab_id: attr(v, "controlled_lab_id")?,
        controlled_lab_budget: attr(v, "controlled_lab_budget")?,
        controlled_lab_reputation: attr(v, "controlled_lab_reputation")?,
        private_jobs: items(v.getattr("private_jobs")?, |j| Ok(JobView {
            job_id: attr(j, "job_id")?, gpu_hours_required: attr(j, "gpu_hours_required")?,
            deadline_round: attr(j, "deadline_round")?, value: attr(j, "value")?,
            min_reliability: attr(j, "min_reliability")?, partial_credit: attr(j, "partial_credit")?,
            pooled: attr(j, "pooled")?, status: attr(j, "status")?, assigned_hours: attr(j, "assigned_hours")?,
            realized_value: attr(j, "realized_value")?, coalition_id: attr(j, "coalition_id")?,
            share: attr(j, "share")?,
        }))?,
        owned_blocks: items(v.getattr("owned_blocks")?, read_block_view)?,
        public_market: MarketView {
            blocks: items(market.getattr("blocks")?, read_block_view)?,
            auctions: items(market.getattr("auctions")?, |a| Ok(AuctionView {
                auction_id: attr(a, "auction_id")?, block_id: attr(a, "block_id")?,
                opened_round: attr(a, "opened_round")?, close_round: attr(a, "close_round")?,
                status: attr(a, "status")?,
                pitches: items(a.getattr("pitches")?, |p| Ok(PitchView {
                    lab_id: attr(p, "lab_id")?, bid: attr(p, "bid")?, job_id: attr(p, "job_id")?,
                    message: attr(p, "message")?, round_index: attr(p, "round_index")?,
                    counter_to: attr(p, "counter_to")?, score: attr(p, "score")?,
                    reasons: strings(p.getattr("reasons")?)?,
                }))?,
                winner: attr(a, "winner")?, price: attr(a, "price")?,
            }))?,
            pooled_jobs: items(market.getattr("pooled_jobs")?, |p| Ok(PooledJobView {
                job_id: attr(p, "job_id")?, owner: attr(p, "owner")?,
                gpu_hours_required: attr(p, "gpu_hours_required")?, deadline_round: attr(p, "deadline_round")?,
                min_reliability: attr(p, "min_reliability")?, status: attr(p, "status")?,
            }))?,
            events: items(market.getattr("events")?, |e| Ok(EventView {
                round_index: attr(e, "round_index")?, kind: attr(e, "kind")?, text: attr(e, "text")?,
            }))?,
        },
        visible_labs: items(v.getattr("visible_labs")?, |l| Ok(LabView {
            lab_id: attr(l, "lab_id")?, budget: attr(l, "budget")?, reputation: attr(l, "reputation")?,
            n_blocks: attr(l, "n_blocks")?, finished: attr(l, "finished")?,
        }))?,
        active_offers: items(v.getattr("active_offers")?, |o| Ok(OfferView {
            offer_id: attr(o, "offer_id")?, sender: attr(o, "sender")?, target: attr(o, "target")?,
            direction: attr(o, "direction")?, block_ids: strings(o.getattr("block_ids")?)?,
            requested_block_ids: strings(o.getattr("requested_block_ids")?)?, payment: attr(o, "payment")?,
            requested_payment: attr(o, "requested_payment")?, created_round: attr(o, "created_round")?,
            expires_round: attr(o, "expires_round")?, conditions: mapping(o.getattr("conditions")?, |x| x.extract())?,
            message: attr(o, "message")?, status: attr(o, "status")?, parent_offer_id: attr(o, "parent_offer_id")?,
            value_to_me: attr(o, "value_to_me")?,
        }))?,
        active_coalitions: items(v.getattr("active_coalitions")?, |c| Ok(CoalitionView {
            coalition_id: attr(c, "coalition_id")?, proposer: attr(c, "proposer")?,
            members: strings(c.getattr("members")?)?, job_id: attr(c, "job_id")?,
            gpu_hours_required: attr(c, "gpu_hours_required")?, deadline_round: attr(c, "deadline_round")?,
            commitments: mapping(c.getattr("commitments")?, strings)?, payment: attr(c, "payment")?,
            shares: mapping(c.getattr("shares")?, |x| x.extract())?, expires_round: attr(c, "expires_round")?,
            consented: strings(c.getattr("consented")?)?, status: attr(c, "status")?,
            pooled_hours: attr(c, "pooled_hours")?, breaches: strings(c.getattr("breaches")?)?,
            excused: strings(c.getattr("excused")?)?, created_round: attr(c, "created_round")?,
        }))?,
        message_history: items(v.getattr("message_history")?, |m| Ok(MessageView {
            round_index: attr(m, "round_index")?, sender: attr(m, "sender")?, target: attr(m, "target")?,
            text: attr(m, "text")?,
        }))?,
        last_action_result: ResultView {
            ok: attr(result, "ok")?, code: attr(result, "code")?, message: attr(result, "message")?,
        },
        batna: attr(v, "batna")?,
        surplus_over_batna: attr(v, "surplus_over_batna")?,
        best_plan: mapping(v.getattr("best_plan")?, strings)?,
        reward_scale: attr(v, "reward_scale")?,
        reward: attr(v, "reward")?,
        reward_breakdown: mapping(v.getattr("reward_breakdown")?, |x| x.extract())?,
        done: attr(v, "done")?,
    })
}

// ------------------------------------------------------------ the policy as a Python object

/// `make_policy(archetype, seed=seed, **params)` for a negotiator archetype, in Rust: `act`
/// chooses the seat's move from its own view, keeping its state from one call to the next.
#[pyclass(name = "Negotiator")]
pub struct PyNegotiator {
    inner: Negotiator,
}

#[pymethods]
impl PyNegotiator {
    #[new]
    fn new(archetype: &str, seed: &PyAny, params: Option<&PyDict>) -> PyResult<Self> {
        let mut values: IndexMap<String, f64> = IndexMap::new();
        if let Some(p) = params {
            for (k, v) in p.iter() {
                values.insert(k.extract()?, v.extract()?);
            }
        }
        let inner = make_negotiator(archetype, seeded(seed)?, &values)
            .ok_or_else(|| PyValueError::new_err(format!("unknown negotiator archetype {archetype:?}")))?;
        Ok(PyNegotiator { inner })
    }

    /// The move for seat `lab_id` of the Python `world` now, on the view `seat_view` gives it
    /// (built in Rust from the world read whole).
    fn act(&mut self, py: Python, world: &PyAny, lab_id: &str) -> PyResult<PyObject> {
        let w = crate::convert::read_world(world)?;
        if !w.labs.contains_key(lab_id) {
            return Err(pyo3::exceptions::PyKeyError::new_err(lab_id.to_string()));
        }
        let obs = seat_view(&w, lab_id, None);
        move_to_py(py, self.inner.act(&obs))
    }

    /// The move for the seat whose Python view (`SeatView`, with aids) is `view`.
    fn act_view(&mut self, py: Python, view: &PyAny) -> PyResult<PyObject> {
        let obs = read_seat_view(view)?;
        move_to_py(py, self.inner.act(&obs))
    }

    #[getter]
    fn name(&self) -> &'static str {
        self.inner.archetype.name()
    }

    /// The policy's parameters and the state it keeps (see [`negotiator_state`]).
    fn state(&self, py: Python) -> PyResult<PyObject> {
        negotiator_state(py, &self.inner)
    }
}

/// A negotiator's parameters and the state it keeps, in the Python attributes' shapes
/// (`grudges`, `asked`: dicts with sorted keys; `refusers`: a sorted list; `rng`: `getstate()`).
pub fn negotiator_state(py: Python, n: &Negotiator) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    for (k, v) in [
        ("acceptance_margin", n.acceptance_margin), ("deadline_sensitivity", n.deadline_sensitivity),
        ("honesty", n.honesty), ("coalition_trust", n.coalition_trust),
        ("retaliation_memory", n.retaliation_memory), ("risk", n.risk), ("min_pool_gain", n.min_pool_gain),
    ] {
        d.set_item(k, v)?;
    }
    let sorted_map = |m: &std::collections::HashMap<String, i64>| -> PyResult<PyObject> {
        let mut pairs: Vec<_> = m.iter().collect();
        pairs.sort();
        let out = PyDict::new(py);
        for (k, v) in pairs {
            out.set_item(k, v)?;
        }
        Ok(out.into())
    };
    d.set_item("grudges", sorted_map(&n.grudges)?)?;
    d.set_item("asked", sorted_map(&n.asked)?)?;
    let mut refusers: Vec<&String> = n.refusers.iter().collect();
    refusers.sort();
    d.set_item("refusers", PyList::new(py, refusers))?;
    d.set_item("rng", n.rng.to_py_state(py)?)?;
    Ok(d.into())
}

/// Test hook: `OwnPlanner(view, pooled=pooled)` on a Python view, asked for `plan(extra,
/// without, money)`, `net(extra, without, money)` and `gain(extra, without, money)`, as
/// `(value, energy, assignment), net, gain`; `extra` names blocks of the view (market first).
#[pyfunction]
fn own_planner(py: Python, view: &PyAny, pooled: bool, extra: Vec<String>, without: Vec<String>, money: f64)
    -> PyResult<PyObject> {
    let obs = read_seat_view(view)?;
    let planner = OwnPlanner::new(&obs, pooled);
    let mut blocks = Vec::with_capacity(extra.len());
    for id in &extra {
        let found = obs.public_market.blocks.iter().chain(&obs.owned_blocks).find(|b| b.block_id == *id);
        blocks.push(found.ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(id.clone()))?);
    }
    let without: Vec<&str> = without.iter().map(|s| s.as_str()).collect();
    let (value, energy, assignment) = planner.plan(&blocks, &without, money);
    let assigned = PyDict::new(py);
    for (b, j) in &assignment {
        assigned.set_item(b, j)?;
    }
    let plan = PyTuple::new(py, [value.to_object(py), energy.to_object(py), assigned.to_object(py)]);
    let net = planner.net(&blocks, &without, money);
    let gain = planner.gain(&blocks, &without, money);
    Ok(PyTuple::new(py, [plan.to_object(py), net.to_object(py), gain.to_object(py)]).into())
}

/// Test hook: `OwnPlanner.pooled_value(view.private_jobs[index], hours)`.
#[pyfunction]
fn own_planner_pooled_value(view: &PyAny, index: usize, hours: i64) -> PyResult<f64> {
    let obs = read_seat_view(view)?;
    let job = obs.private_jobs.get(index).ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(index))?;
    Ok(OwnPlanner::pooled_value(job, hours))
}

/// `archetype_names()`: `core.worldgen.ARCHETYPES`, as the Rust port knows them.
#[pyfunction]
fn archetype_names(py: Python) -> PyObject {
    PyTuple::new(py, ARCHETYPES).into()
}

pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_class::<PyNegotiator>()?;
    m.add_function(wrap_pyfunction!(archetype_names, m)?)?;
    m.add_function(wrap_pyfunction!(own_planner, m)?)?;
    m.add_function(wrap_pyfunction!(own_planner_pooled_value, m)?)?;
    Ok(())
}
