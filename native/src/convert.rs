//! The world across the boundary: a Python `World` read into [`World`], and a `World` written out
//! as the plain state the tests compare with the Python one (`world_state` in
//! `tests/native/helpers_rs.py`: every field of every object, dicts in their order, the RNG's state).

use indexmap::IndexMap;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::rng::PyRandom;
use crate::types::*;
use crate::value::PyValue;

fn attr<'p, T: FromPyObject<'p>>(obj: &'p PyAny, name: &str) -> PyResult<T> {
    obj.getattr(name)?.extract()
}

fn status<T>(obj: &PyAny, parse: fn(&str) -> Option<T>) -> PyResult<T> {
    let text: String = attr(obj, "status")?;
    parse(&text).ok_or_else(|| PyValueError::new_err(format!("unknown status {text:?}")))
}

fn strings(obj: &PyAny) -> PyResult<Vec<String>> {
    obj.iter()?.map(|x| x?.extract()).collect()
}

fn map_of<'p, T>(obj: &'p PyAny, mut read: impl FnMut(&'p PyAny) -> PyResult<T>) -> PyResult<IndexMap<String, T>> {
    let dict: &PyDict = obj.downcast()?;
    let mut out = IndexMap::with_capacity(dict.len());
    for (k, v) in dict.iter() {
        out.insert(k.extract()?, read(v)?);
    }
    Ok(out)
}

fn read_block(b: &PyAny) -> PyResult<Block> {
    Ok(Block {
        block_id: attr(b, "block_id")?,
        owner: attr(b, "owner")?,
        gpu_count: attr(b, "gpu_count")?,
        start_round: attr(b, "start_round")?,
        duration: attr(b, "duration")?,
        reliability: attr(b, "reliability")?,
        energy_cost: attr(b, "energy_cost")?,
        status: status(b, BlockStatus::parse)?,
        job_id: attr(b, "job_id")?,
        reserved_for: attr(b, "reserved_for")?,
        coalition_id: attr(b, "coalition_id")?,
        no_resale: attr(b, "no_resale")?,
        must_allocate: attr(b, "must_allocate")?,
        energy_paid: attr(b, "energy_paid")?,
    })
}

fn read_job(j: &PyAny) -> PyResult<Job> {
    Ok(Job {
        job_id: attr(j, "job_id")?,
        owner: attr(j, "owner")?,
        gpu_hours_required: attr(j, "gpu_hours_required")?,
        deadline_round: attr(j, "deadline_round")?,
        value: attr(j, "value")?,
        min_reliability: attr(j, "min_reliability")?,
        partial_credit: attr(j, "partial_credit")?,
        pooled: attr(j, "pooled")?,
        status: status(j, JobStatus::parse)?,
        realized_value: attr(j, "realized_value")?,
        surged: attr(j, "surged")?,
        coalition_id: attr(j, "coalition_id")?,
    })
}

fn read_lab(l: &PyAny) -> PyResult<Lab> {
    let signature: Option<&PyAny> = attr(l, "last_signature")?;
    let last_signature = match signature {
        None => None,
        Some(sig) => Some(sig.iter()?.map(|pair| pair?.extract::<(String, String)>()).collect::<PyResult<_>>()?),
    };
    Ok(Lab {
        lab_id: attr(l, "lab_id")?,
        budget: attr(l, "budget")?,
        reputation: attr(l, "reputation")?,
        initial_budget: attr(l, "initial_budget")?,
        archetype: attr(l, "archetype")?,
        params: map_of(l.getattr("params")?, |v| v.extract())?,
        finished: attr(l, "finished")?,
        realized_value: attr(l, "realized_value")?,
        energy_paid: attr(l, "energy_paid")?,
        actions: attr(l, "actions")?,
        invalid_actions: attr(l, "invalid_actions")?,
        offers_made: attr(l, "offers_made")?,
        offers_received: attr(l, "offers_received")?,
        deals: attr(l, "deals")?,
        commitments: attr(l, "commitments")?,
        breaches: attr(l, "breaches")?,
        last_signature,
    })
}

fn read_offer(o: &PyAny) -> PyResult<Offer> {
    Ok(Offer {
        offer_id: attr(o, "offer_id")?,
        sender: attr(o, "sender")?,
        target: attr(o, "target")?,
        block_ids: strings(o.getattr("block_ids")?)?,
        requested_block_ids: strings(o.getattr("requested_block_ids")?)?,
        payment: attr(o, "payment")?,
        created_round: attr(o, "created_round")?,
        expires_round: attr(o, "expires_round")?,
        conditions: map_of(o.getattr("conditions")?, |v| v.extract())?,
        message: attr(o, "message")?,
        status: status(o, OfferStatus::parse)?,
        parent_offer_id: attr(o, "parent_offer_id")?,
        settled_round: attr(o, "settled_round")?,
        requested_payment: attr(o, "requested_payment")?,
        job_id: attr(o, "job_id")?,
    })
}

fn read_coalition(c: &PyAny) -> PyResult<Coalition> {
    let mut consented = strings(c.getattr("consented")?)?;
    consented.sort();
    Ok(Coalition {
        coalition_id: attr(c, "coalition_id")?,
        proposer: attr(c, "proposer")?,
        members: strings(c.getattr("members")?)?,
        job_id: attr(c, "job_id")?,
        commitments: map_of(c.getattr("commitments")?, strings)?,
        payment: attr(c, "payment")?,
        shares: map_of(c.getattr("shares")?, |v| v.extract())?,
        created_round: attr(c, "created_round")?,
        expires_round: attr(c, "expires_round")?,
        consented,
        status: status(c, CoalitionStatus::parse)?,
        breaches: strings(c.getattr("breaches")?)?,
        excused: strings(c.getattr("excused")?)?,
    })
}

fn read_pitch(p: &PyAny) -> PyResult<Pitch> {
    Ok(Pitch {
        lab_id: attr(p, "lab_id")?,
        bid: attr(p, "bid")?,
        job_id: attr(p, "job_id")?,
        message: attr(p, "message")?,
        round_index: attr(p, "round_index")?,
        counter_to: attr(p, "counter_to")?,
        score: attr(p, "score")?,
        reasons: strings(p.getattr("reasons")?)?,
    })
}

fn read_auction(a: &PyAny) -> PyResult<Auction> {
    Ok(Auction {
        auction_id: attr(a, "auction_id")?,
        block_id: attr(a, "block_id")?,
        opened_round: attr(a, "opened_round")?,
        close_round: attr(a, "close_round")?,
        pitches: map_of(a.getattr("pitches")?, read_pitch)?,
        status: status(a, AuctionStatus::parse)?,
        winner: attr(a, "winner")?,
        price: attr(a, "price")?,
    })
}

fn read_params(p: &PyAny) -> PyResult<TaskParams> {
    Ok(TaskParams {
        task: attr(p, "task")?,
        split: attr(p, "split")?,
        n_labs: attr(p, "n_labs")?,
        rounds: attr(p, "rounds")?,
        jobs_per_lab: attr(p, "jobs_per_lab")?,
        blocks_per_lab: attr(p, "blocks_per_lab")?,
        n_shocks: attr(p, "n_shocks")?,
        shock_weights: map_of(p.getattr("shock_weights")?, |v| v.extract())?,
        energy_spike: attr(p, "energy_spike")?,
        demand_surge: attr(p, "demand_surge")?,
        reliability_drop: attr(p, "reliability_drop")?,
        budget_frac: attr(p, "budget_frac")?,
        pooled_jobs: attr(p, "pooled_jobs")?,
        opponent_ranges: map_of(p.getattr("opponent_ranges")?, |v| v.extract())?,
        value_per_hour_cap: attr(p, "value_per_hour_cap")?,
    })
}

/// A Python `World` read whole (its RNG handed over through `getstate()`).
pub fn read_world(w: &PyAny) -> PyResult<World> {
    let list = |name: &str| -> PyResult<Vec<&PyAny>> { w.getattr(name)?.iter()?.collect() };
    Ok(World {
        task: attr(w, "task")?,
        split: attr(w, "split")?,
        seed: attr(w, "seed")?,
        max_rounds: attr(w, "max_rounds")?,
        params: read_params(w.getattr("params")?)?,
        rng: PyRandom::from_py_state(w.getattr("rng")?.call_method0("getstate")?)?,
        labs: map_of(w.getattr("labs")?, read_lab)?,
        blocks: map_of(w.getattr("blocks")?, read_block)?,
        jobs: map_of(w.getattr("jobs")?, read_job)?,
        shock_schedule: list("shock_schedule")?
            .into_iter()
            .map(|s| Ok(ScheduledShock { round_index: attr(s, "round_index")?, kind: attr(s, "kind")?,
                                         magnitude: attr(s, "magnitude")? }))
            .collect::<PyResult<_>>()?,
        round_index: attr(w, "round_index")?,
        offers: map_of(w.getattr("offers")?, read_offer)?,
        coalitions: map_of(w.getattr("coalitions")?, read_coalition)?,
        auctions: map_of(w.getattr("auctions")?, read_auction)?,
        messages: list("messages")?
            .into_iter()
            .map(|m| Ok(Message { round_index: attr(m, "round_index")?, sender: attr(m, "sender")?,
                                  target: attr(m, "target")?, text: attr(m, "text")? }))
            .collect::<PyResult<_>>()?,
        events: list("events")?
            .into_iter()
            .map(|e| {
                let data: &PyDict = e.getattr("data")?.downcast()?;
                let data = data.iter().map(|(k, v)| Ok((k.extract()?, v.extract()?))).collect::<PyResult<_>>()?;
                Ok(Event { round_index: attr(e, "round_index")?, kind: attr(e, "kind")?, text: attr(e, "text")?, data })
            })
            .collect::<PyResult<_>>()?,
        done: attr(w, "done")?,
        next_id: attr(w, "next_id")?,
        initial_potential: map_of(w.getattr("initial_potential")?, |v| v.extract())?,
        reward_scale: map_of(w.getattr("reward_scale")?, |v| v.extract())?,
        judge_mode: attr(w, "judge_mode")?,
        version: attr(w, "version")?,
    })
}

/// A Python core `Action` read field by field (each as the Python value it holds).
pub fn read_action(a: &PyAny) -> PyResult<Action> {
    let f = |name: &str| -> PyResult<PyValue> { a.getattr(name)?.extract() };
    Ok(Action {
        action_type: f("action_type")?,
        target_lab_id: f("target_lab_id")?,
        offer_id: f("offer_id")?,
        coalition_id: f("coalition_id")?,
        block_ids: f("block_ids")?,
        requested_block_ids: f("requested_block_ids")?,
        job_id: f("job_id")?,
        payment: f("payment")?,
        requested_payment: f("requested_payment")?,
        message: f("message")?,
        conditions: f("conditions")?,
        member_lab_ids: f("member_lab_ids")?,
        shares: f("shares")?,
        expires_in: f("expires_in")?,
    })
}

// ---------------------------------------------------------------- the plain state, for the tests

fn dict<'p>(py: Python<'p>, items: Vec<(&str, PyObject)>) -> PyResult<&'p PyDict> {
    let d = PyDict::new(py);
    for (k, v) in items {
        d.set_item(k, v)?;
    }
    Ok(d)
}

fn strs(py: Python, xs: &[String]) -> PyObject {
    PyList::new(py, xs).into()
}

fn fmap<T: ToPyObject>(py: Python, m: &IndexMap<String, T>) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    for (k, v) in m {
        d.set_item(k, v)?;
    }
    Ok(d.into())
}

fn block_state(py: Python, b: &Block) -> PyResult<PyObject> {
    Ok(dict(py, vec![
        ("block_id", b.block_id.to_object(py)), ("owner", b.owner.to_object(py)),
        ("gpu_count", b.gpu_count.to_object(py)), ("start_round", b.start_round.to_object(py)),
        ("duration", b.duration.to_object(py)), ("reliability", b.reliability.to_object(py)),
        ("energy_cost", b.energy_cost.to_object(py)), ("status", b.status.as_str().to_object(py)),
        ("job_id", b.job_id.to_object(py)), ("reserved_for", b.reserved_for.to_object(py)),
        ("coalition_id", b.coalition_id.to_object(py)), ("no_resale", b.no_resale.to_object(py)),
        ("must_allocate", b.must_allocate.to_object(py)), ("energy_paid", b.energy_paid.to_object(py)),
    ])?.into())
}

fn job_state(py: Python, j: &Job) -> PyResult<PyObject> {
    Ok(dict(py, vec![
        ("job_id", j.job_id.to_object(py)), ("owner", j.owner.to_object(py)),
        ("gpu_hours_required", j.gpu_hours_required.to_object(py)),
        ("deadline_round", j.deadline_round.to_object(py)), ("value", j.value.to_object(py)),
        ("min_reliability", j.min_reliability.to_object(py)), ("partial_credit", j.partial_credit.to_object(py)),
        ("pooled", j.pooled.to_object(py)), ("status", j.status.as_str().to_object(py)),
        ("realized_value", j.realized_value.to_object(py)), ("surged", j.surged.to_object(py)),
        ("coalition_id", j.coalition_id.to_object(py)),
    ])?.into())
}

fn lab_state(py: Python, l: &Lab) -> PyResult<PyObject> {
    let signature: PyObject = match &l.last_signature {
        None => py.None(),
        Some(pairs) => PyList::new(py, pairs.iter().map(|(k, v)| PyList::new(py, [k, v]))).into(),
    };
    Ok(dict(py, vec![
        ("lab_id", l.lab_id.to_object(py)), ("budget", l.budget.to_object(py)),
        ("reputation", l.reputation.to_object(py)), ("initial_budget", l.initial_budget.to_object(py)),
        ("archetype", l.archetype.to_object(py)), ("params", fmap(py, &l.params)?),
        ("finished", l.finished.to_object(py)), ("realized_value", l.realized_value.to_object(py)),
        ("energy_paid", l.energy_paid.to_object(py)), ("actions", l.actions.to_object(py)),
        ("invalid_actions", l.invalid_actions.to_object(py)), ("offers_made", l.offers_made.to_object(py)),
        ("offers_received", l.offers_received.to_object(py)), ("deals", l.deals.to_object(py)),
        ("commitments", l.commitments.to_object(py)), ("breaches", l.breaches.to_object(py)),
        ("last_signature", signature),
    ])?.into())
}

fn offer_state(py: Python, o: &Offer) -> PyResult<PyObject> {
    Ok(dict(py, vec![
        ("offer_id", o.offer_id.to_object(py)), ("sender", o.sender.to_object(py)),
        ("target", o.target.to_object(py)), ("block_ids", strs(py, &o.block_ids)),
        ("requested_block_ids", strs(py, &o.requested_block_ids)), ("payment", o.payment.to_object(py)),
        ("created_round", o.created_round.to_object(py)), ("expires_round", o.expires_round.to_object(py)),
        ("conditions", fmap(py, &o.conditions)?), ("message", o.message.to_object(py)),
        ("status", o.status.as_str().to_object(py)), ("parent_offer_id", o.parent_offer_id.to_object(py)),
        ("settled_round", o.settled_round.to_object(py)), ("requested_payment", o.requested_payment.to_object(py)),
        ("job_id", o.job_id.to_object(py)),
    ])?.into())
}

fn coalition_state(py: Python, c: &Coalition) -> PyResult<PyObject> {
    let commitments = PyDict::new(py);
    for (k, v) in &c.commitments {
        commitments.set_item(k, strs(py, v))?;
    }
    Ok(dict(py, vec![
        ("coalition_id", c.coalition_id.to_object(py)), ("proposer", c.proposer.to_object(py)),
        ("members", strs(py, &c.members)), ("job_id", c.job_id.to_object(py)),
        ("commitments", commitments.into()), ("payment", c.payment.to_object(py)),
        ("shares", fmap(py, &c.shares)?), ("created_round", c.created_round.to_object(py)),
        ("expires_round", c.expires_round.to_object(py)), ("consented", strs(py, &c.consented)),
        ("status", c.status.as_str().to_object(py)), ("breaches", strs(py, &c.breaches)),
        ("excused", strs(py, &c.excused)),
    ])?.into())
}

fn auction_state(py: Python, a: &Auction) -> PyResult<PyObject> {
    let pitches = PyDict::new(py);
    for (k, p) in &a.pitches {
        pitches.set_item(k, dict(py, vec![
            ("lab_id", p.lab_id.to_object(py)), ("bid", p.bid.to_object(py)), ("job_id", p.job_id.to_object(py)),
            ("message", p.message.to_object(py)), ("round_index", p.round_index.to_object(py)),
            ("counter_to", p.counter_to.to_object(py)), ("score", p.score.to_object(py)),
            ("reasons", strs(py, &p.reasons)),
        ])?)?;
    }
    Ok(dict(py, vec![
        ("auction_id", a.auction_id.to_object(py)), ("block_id", a.block_id.to_object(py)),
        ("opened_round", a.opened_round.to_object(py)), ("close_round", a.close_round.to_object(py)),
        ("pitches", pitches.into()), ("status", a.status.as_str().to_object(py)),
        ("winner", a.winner.to_object(py)), ("price", a.price.to_object(py)),
    ])?.into())
}

/// The whole world as plain Python data, in the shape of the tests' `world_state` (the task
/// parameters left out: they are read, never changed).
pub fn world_state(py: Python, w: &World) -> PyResult<PyObject> {
    let map = |items: Vec<(&String, PyObject)>| -> PyResult<PyObject> {
        let d = PyDict::new(py);
        for (k, v) in items {
            d.set_item(k, v)?;
        }
        Ok(d.into())
    };
    let labs = map(w.labs.iter().map(|(k, v)| Ok((k, lab_state(py, v)?))).collect::<PyResult<_>>()?)?;
    let blocks = map(w.blocks.iter().map(|(k, v)| Ok((k, block_state(py, v)?))).collect::<PyResult<_>>()?)?;
    let jobs = map(w.jobs.iter().map(|(k, v)| Ok((k, job_state(py, v)?))).collect::<PyResult<_>>()?)?;
    let offers = map(w.offers.iter().map(|(k, v)| Ok((k, offer_state(py, v)?))).collect::<PyResult<_>>()?)?;
    let coalitions = map(w.coalitions.iter().map(|(k, v)| Ok((k, coalition_state(py, v)?))).collect::<PyResult<_>>()?)?;
    let auctions = map(w.auctions.iter().map(|(k, v)| Ok((k, auction_state(py, v)?))).collect::<PyResult<_>>()?)?;
    let shocks = PyList::new(py, w.shock_schedule.iter().map(|s| {
        PyTuple::new(py, [s.round_index.to_object(py), s.kind.to_object(py), s.magnitude.to_object(py)])
    }));
    let messages = PyList::new(py, w.messages.iter().map(|m| {
        PyTuple::new(py, [m.round_index.to_object(py), m.sender.to_object(py), m.target.to_object(py),
                          m.text.to_object(py)])
    }));
    let mut events = Vec::with_capacity(w.events.len());
    for e in &w.events {
        let data = PyDict::new(py);
        for (k, v) in &e.data {
            data.set_item(k, v.clone().into_py(py))?;
        }
        events.push(PyTuple::new(py, [e.round_index.to_object(py), e.kind.to_object(py), e.text.to_object(py),
                                      data.into()]));
    }
    Ok(dict(py, vec![
        ("task", w.task.to_object(py)), ("split", w.split.to_object(py)), ("seed", w.seed.to_object(py)),
        ("max_rounds", w.max_rounds.to_object(py)), ("rng", w.rng.to_py_state(py)?),
        ("labs", labs), ("blocks", blocks), ("jobs", jobs), ("shock_schedule", shocks.into()),
        ("round_index", w.round_index.to_object(py)), ("offers", offers), ("coalitions", coalitions),
        ("auctions", auctions), ("messages", messages.into()), ("events", PyList::new(py, events).into()),
        ("done", w.done.to_object(py)), ("next_id", w.next_id.to_object(py)),
        ("initial_potential", fmap(py, &w.initial_potential)?), ("reward_scale", fmap(py, &w.reward_scale)?),
        ("judge_mode", w.judge_mode.to_object(py)), ("version", w.version.to_object(py)),
    ])?.into())
}

/// `world_roundtrip(world)`: a Python world read into Rust and written back as plain state.
#[pyfunction]
fn world_roundtrip(py: Python, world: &PyAny) -> PyResult<PyObject> {
    world_state(py, &read_world(world)?)
}

pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(world_roundtrip, m)?)?;
    Ok(())
}

