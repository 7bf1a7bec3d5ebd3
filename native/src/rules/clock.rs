//! `gpu_arena.core.rules.clock`: what happens between rounds (expiry of offers and proposals,
//! blocks starting, jobs settling) and the final settlement.

use std::collections::BTreeSet;

use indexmap::IndexMap;
use pyo3::prelude::*;

use crate::allocation::job_value;
use crate::rules::auctions::{resolve_auctions, UnknownJudgeMode};
use crate::rules::holdings::auto_allocate;
use crate::rules::limits::{REP_BREACH, REP_HONOURED};
use crate::types::{BlockStatus, CoalitionStatus, Event, JobStatus, Offer, OfferStatus, World};
use crate::value::PyValue;
use crate::valuation::valid_hours;

/// `_settleable`: every block of the offer still with its side, not started, free or reserved.
fn settleable(world: &World, offer: &Offer) -> bool {
    for (owner, ids) in [(&offer.sender, &offer.block_ids), (&offer.target, &offer.requested_block_ids)] {
        for bid in ids {
            let b = &world.blocks[bid];
            if b.owner.as_ref() != Some(owner) || b.start_round <= world.round_index || !b.status.plannable() {
                return false;
            }
        }
    }
    true
}

/// `_committable`: a committed block still its member's, not started, free or reserved.
fn committable(world: &World, block_id: &str, owner: &str) -> bool {
    let b = &world.blocks[block_id];
    b.owner.as_deref() == Some(owner) && b.start_round > world.round_index && b.status.plannable()
}

/// `expire`: close offers and coalition proposals past their expiry, and those that can no longer
/// settle (a block started, failed, moved or got committed): no seat is shown a deal it cannot take.
pub fn expire(world: &mut World) {
    let r = world.round_index;
    for at in 0..world.offers.len() {
        let o = &world.offers[at];
        if o.status != OfferStatus::Open {
            continue;
        }
        let status = if r >= o.expires_round {
            OfferStatus::Expired
        } else if !settleable(world, o) {
            OfferStatus::Superseded
        } else {
            continue;
        };
        world.offers[at].status = status;
    }
    for at in 0..world.coalitions.len() {
        let c = &world.coalitions[at];
        if c.status != CoalitionStatus::Proposed {
            continue;
        }
        let status = if r >= c.expires_round {
            CoalitionStatus::Expired
        } else if c.commitments.iter().any(|(m, ids)| ids.iter().any(|bid| !committable(world, bid, m))) {
            CoalitionStatus::Failed
        } else {
            continue;
        };
        world.coalitions[at].status = status;
    }
}

/// `start_blocks`: windows opening this round. Assigned blocks run (committed ones honour their
/// coalition), the rest idle. Returns (affected labs, lapsed reservations per lab, condition
/// breaches per lab), the maps in the order Python's dicts fill.
pub fn start_blocks(world: &mut World) -> (BTreeSet<String>, IndexMap<String, i64>, IndexMap<String, i64>) {
    let r = world.round_index;
    let mut affected = BTreeSet::new();
    let mut lapsed: IndexMap<String, i64> = IndexMap::new();
    let mut breaches: IndexMap<String, i64> = IndexMap::new();
    for at in 0..world.blocks.len() {
        let b = &world.blocks[at];
        let Some(owner) = b.owner.clone() else { continue };
        if b.start_round != r {
            continue;
        }
        match b.status {
            BlockStatus::Allocated | BlockStatus::Committed => {
                if b.status == BlockStatus::Committed {
                    let lab = &mut world.labs[&owner];
                    let honoured = lab.reputation + REP_HONOURED;
                    lab.reputation = if honoured < 1.0 { honoured } else { 1.0 }; // min(1.0, x)
                }
                world.blocks[at].status = BlockStatus::Running;
            }
            BlockStatus::Free | BlockStatus::Reserved => {
                affected.insert(owner.clone());
                if b.status == BlockStatus::Reserved {
                    *lapsed.entry(owner.clone()).or_insert(0) += 1;
                }
                if b.must_allocate {
                    let block_id = b.block_id.clone();
                    *breaches.entry(owner.clone()).or_insert(0) += 1;
                    let lab = &mut world.labs[&owner];
                    lab.breaches += 1;
                    lab.commitments += 1;
                    let fallen = lab.reputation + REP_BREACH;
                    lab.reputation = if fallen > 0.0 { fallen } else { 0.0 }; // max(0.0, x)
                    world.events.push(Event {
                        round_index: r, kind: "breach".to_string(),
                        text: format!("{owner} left {block_id} unused against its must_allocate_to_job condition"),
                        data: vec![("lab".to_string(), PyValue::Str(owner.clone())),
                                   ("block_id".to_string(), PyValue::Str(block_id))],
                    });
                }
                let b = &mut world.blocks[at];
                b.status = BlockStatus::Idle;
                b.reserved_for = None;
            }
            _ => {}
        }
    }
    for b in world.blocks.values_mut() {
        if b.status == BlockStatus::Running && b.end_round() <= r {
            b.status = BlockStatus::Done;
        }
    }
    (affected, lapsed, breaches)
}

/// `settle_job`: the job's value from its valid hours, shared by its coalition if it has one;
/// returns the labs credited.
pub fn settle_job(world: &mut World, job_id: &str) -> BTreeSet<String> {
    let job = &world.jobs[job_id];
    let hours = valid_hours(world, job);
    let v = job_value(job.value, job.gpu_hours_required, job.partial_credit, hours);
    let status = if hours >= job.gpu_hours_required {
        JobStatus::Completed
    } else if v > 0.0 {
        JobStatus::Partial
    } else {
        JobStatus::Failed
    };
    let job = &mut world.jobs[job_id];
    job.realized_value = v;
    job.status = status;
    if let Some(cid) = job.coalition_id.clone() {
        let c = &world.coalitions[&cid];
        let shares: Vec<(String, f64)> = c.shares.iter().map(|(m, s)| (m.clone(), *s)).collect();
        for (m, share) in shares {
            world.labs[&m].realized_value += share * v;
        }
        let c = &mut world.coalitions[&cid];
        c.status = CoalitionStatus::Settled;
        return c.members.iter().cloned().collect();
    }
    let owner = job.owner.clone();
    world.labs[&owner].realized_value += v;
    BTreeSet::from([owner])
}

/// `settle_due_jobs`: settle every open job whose deadline has come.
pub fn settle_due_jobs(world: &mut World) -> BTreeSet<String> {
    let mut affected = BTreeSet::new();
    for at in 0..world.jobs.len() {
        let job = &world.jobs[at];
        if job.status == JobStatus::Open && job.deadline_round <= world.round_index {
            let job_id = job.job_id.clone();
            affected.extend(settle_job(world, &job_id));
        }
    }
    affected
}

/// `final_settlement`: the end of the episode. Close the auctions, allocate every lab's remaining
/// blocks by its best plan, expire what is open and settle every job.
pub fn final_settlement(world: &mut World) -> Result<BTreeSet<String>, UnknownJudgeMode> {
    let mut affected = resolve_auctions(world, true)?;
    for lid in world.lab_ids() {
        if !auto_allocate(world, &lid, None).is_empty() {
            affected.insert(lid);
        }
    }
    for o in world.offers.values_mut() {
        if o.status == OfferStatus::Open {
            o.status = OfferStatus::Expired;
        }
    }
    for c in world.coalitions.values_mut() {
        if c.status == CoalitionStatus::Proposed {
            c.status = CoalitionStatus::Expired;
        }
    }
    for at in 0..world.jobs.len() {
        if world.jobs[at].status == JobStatus::Open {
            let job_id = world.jobs[at].job_id.clone();
            affected.extend(settle_job(world, &job_id));
        }
    }
    world.done = true;
    Ok(affected)
}

// ---------------------------------------------------------------- for the tests

/// `clock_tick(world)`: the round change on a copy of `world`, in the shape of the tests'
/// `py_tick` (`Episode._tick` without the ledger, the rule judge alone): what each stage
/// returned (sets sorted, maps sorted by key), then the copy's state.
#[pyfunction]
fn clock_tick(py: Python, world: &PyAny) -> PyResult<(Vec<PyObject>, PyObject)> {
    use pyo3::types::PyDict;
    let mut w = crate::convert::read_world(world)?;
    let sorted = |s: BTreeSet<String>| -> PyObject { s.into_iter().collect::<Vec<_>>().into_py(py) };
    let by_key = |m: IndexMap<String, i64>| -> PyResult<PyObject> {
        let mut items: Vec<(String, i64)> = m.into_iter().collect();
        items.sort();
        let d = PyDict::new(py);
        for (k, v) in items {
            d.set_item(k, v)?;
        }
        Ok(d.into())
    };
    w.round_index += 1;
    let (affected, lapsed, breaches) = start_blocks(&mut w);
    let mut stages = vec![sorted(affected), by_key(lapsed)?, by_key(breaches)?];
    expire(&mut w);
    stages.push(sorted(resolve_auctions(&mut w, false)?));
    stages.push(sorted(settle_due_jobs(&mut w)));
    let shocked = crate::shocks::fire_due_shocks(&mut w).map_err(pyo3::exceptions::PyRuntimeError::new_err)?;
    stages.push(sorted(shocked));
    if w.round_index >= w.max_rounds {
        stages.push(sorted(final_settlement(&mut w)?));
    }
    Ok((stages, crate::convert::world_state(py, &w)?))
}

pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(clock_tick, m)?)?;
    Ok(())
}
