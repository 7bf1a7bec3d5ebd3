//! `gpu_arena.core.rules.holdings`: a lab's own blocks: reserve, release (a commitment released
//! is a breach), allocate to a job, and the best-plan allocation used when a lab finishes or the
//! episode ends.

use std::collections::BTreeSet;

use super::checks::{block_named, check_fits, check_tradeable, coalition_peers, id_list, money, own_job};
use super::limits::REP_BREACH;
use super::outcome::{ActionError, Outcome, RuleResult};
use crate::types::{Action, BlockStatus, CoalitionStatus, Event, JobStatus, World};
use crate::valuation::{best_allocation, block_fits};
use crate::value::PyValue;

/// `allocate_now`: allocate received blocks to the job `job_id` where they fit and the owner can
/// pay the energy; the ids of the blocks allocated.
///
/// Python passes the job itself; the id lets the caller keep no borrow of the world.
pub fn allocate_now(world: &mut World, owner: &str, job_id: Option<&str>, block_ids: &[String]) -> Vec<String> {
    let mut done = Vec::new();
    let job = match job_id.and_then(|jid| world.jobs.get(jid)) {
        Some(job) if job.status == JobStatus::Open && job.owner == owner => job,
        _ => return done,
    };
    let round = world.round_index;
    let lab = world.labs.get_mut(owner).expect("the owner is a lab");
    for bid in block_ids {
        let b = world.blocks.get_mut(bid).expect("a block the caller checked");
        let energy = b.energy_cost * b.hours() as f64;
        if block_fits(b, job) && b.start_round > round && energy <= lab.budget {
            lab.budget -= energy;
            lab.energy_paid += energy;
            b.energy_paid = energy;
            b.status = BlockStatus::Allocated;
            b.job_id = Some(job.job_id.clone());
            b.reserved_for = None;
            done.push(bid.clone());
        }
    }
    done
}

/// `reserve`: earmark free blocks for one of the lab's jobs.
pub fn reserve(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let blocks = id_list(&action.block_ids, "block_ids", true)?;
    let job = own_job(world, &action.job_id, lab_id, true)?.expect("a required job");
    for bid in &blocks {
        let b = block_named(world, bid)?;
        check_tradeable(world, b, lab_id, false)?;
        check_fits(b, job)?;
    }
    let jid = job.job_id.clone();
    for bid in &blocks {
        let b = &mut world.blocks[bid.as_str()];
        b.status = BlockStatus::Reserved;
        b.reserved_for = Some(jid.clone());
    }
    Ok(Outcome::new("allocation", [lab_id.to_string()], format!("reserved {} for {jid}", blocks.join(", ")), 0))
}

/// `release`: free reserved, allocated or committed blocks (refunding their energy); releasing a
/// coalition's committed block is a breach.
pub fn release(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let blocks = id_list(&action.block_ids, "block_ids", true)?;
    for bid in &blocks {
        let b = block_named(world, bid)?;
        if b.owner.as_deref() != Some(lab_id) {
            return Err(ActionError::new("block_not_owned", format!("block {bid} is not yours")));
        }
        if b.start_round <= world.round_index {
            return Err(ActionError::new("block_started", format!("block {bid}'s window has started")));
        }
        if !matches!(b.status, BlockStatus::Reserved | BlockStatus::Allocated | BlockStatus::Committed) {
            return Err(ActionError::new(
                "block_not_releasable",
                format!("block {bid} is {}: nothing to release", b.status.as_str()),
            ));
        }
    }
    let mut affected: BTreeSet<String> = BTreeSet::from([lab_id.to_string()]);
    let mut breaches = 0;
    let mut category = "allocation";
    for bid in &blocks {
        let b = &world.blocks[bid.as_str()];
        // `if b.job_id`: an empty id counts as none
        let pooled = match b.job_id.as_deref() {
            Some(jid) if !jid.is_empty() => world.jobs[jid].coalition_id.clone(),
            _ => None,
        };
        if let Some(cid) = pooled {
            // their shares lose these hours
            affected.extend(world.coalitions[cid.as_str()].members.iter().cloned());
        }
        let status = b.status;
        let coalition_id = b.coalition_id.clone();
        let lab = world.labs.get_mut(lab_id).expect("the actor is a lab");
        let b = world.blocks.get_mut(bid.as_str()).expect("checked above");
        if matches!(status, BlockStatus::Allocated | BlockStatus::Committed) {
            // energy is paid only for blocks that run
            lab.budget += b.energy_paid;
            lab.energy_paid -= b.energy_paid;
            b.energy_paid = 0.0;
        }
        if let (BlockStatus::Committed, Some(cid)) = (status, coalition_id) {
            let coalition = world.coalitions.get_mut(cid.as_str()).expect("a committed block's coalition");
            coalition.breaches.push(lab_id.to_string());
            affected.extend(coalition.members.iter().cloned());
            lab.breaches += 1;
            // max(0.0, x): Python keeps the first of equals
            let rep = lab.reputation + REP_BREACH;
            lab.reputation = if rep > 0.0 { rep } else { 0.0 };
            breaches += 1;
            category = "coalition";
            world.events.push(Event {
                round_index: world.round_index,
                kind: "breach".to_string(),
                text: format!("{lab_id} withdrew block {bid} from coalition {cid}"),
                data: vec![
                    ("lab".to_string(), PyValue::Str(lab_id.to_string())),
                    ("coalition_id".to_string(), PyValue::Str(cid.clone())),
                    ("block_id".to_string(), PyValue::Str(bid.clone())),
                ],
            });
        }
        b.status = BlockStatus::Free;
        b.job_id = None;
        b.reserved_for = None;
        b.coalition_id = None;
    }
    Ok(Outcome::new(category, affected, format!("released {}", blocks.join(", ")), breaches))
}

/// `allocate`: allocate blocks to a job; without a job, where the lab's best plan puts them;
/// with neither, the lab's whole best plan.
pub fn allocate(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let no_job = matches!(action.job_id, PyValue::None);
    if no_job && !action.block_ids.truthy() {
        // the whole best plan less the blocks promised to a coalition still gathering consents
        let promised = promised_blocks(world, lab_id);
        let (done, kept) = allocate_plan(world, lab_id, None, &promised);
        let mut affected = coalition_peers(world, lab_id);
        affected.insert(lab_id.to_string());
        let mut note = if done.is_empty() {
            "nothing to allocate".to_string()
        } else {
            format!("allocated {} by your best plan", done.join(", "))
        };
        if !kept.is_empty() {
            note.push_str(&format!("; kept {} free for your coalition", kept.join(", ")));
        }
        return Ok(Outcome::new("allocation", affected, note, 0));
    }
    if no_job {
        let blocks = id_list(&action.block_ids, "block_ids", true)?;
        for bid in &blocks {
            let b = block_named(world, bid)?;
            check_tradeable(world, b, lab_id, true)?;
        }
        let done = auto_allocate(world, lab_id, Some(&blocks));
        let idle: Vec<&str> = blocks.iter().filter(|bid| !done.contains(bid)).map(|s| s.as_str()).collect();
        let shown = if done.is_empty() { "nothing".to_string() } else { done.join(", ") };
        let mut note = format!("allocated {shown} by your best plan");
        if !idle.is_empty() {
            note.push_str(&format!("; your best plan has no job for {}", idle.join(", ")));
        }
        let mut affected = coalition_peers(world, lab_id);
        affected.insert(lab_id.to_string());
        return Ok(Outcome::new("allocation", affected, note, 0));
    }
    let job = own_job(world, &action.job_id, lab_id, true)?.expect("a required job");
    let blocks = id_list(&action.block_ids, "block_ids", true)?;
    let mut energy = 0.0;
    for bid in &blocks {
        let b = block_named(world, bid)?;
        if b.status == BlockStatus::Reserved && b.reserved_for.as_deref() != Some(job.job_id.as_str()) {
            return Err(ActionError::new(
                "block_reserved",
                format!("block {bid} is reserved for {}", super::checks::opt_str(&b.reserved_for)),
            ));
        }
        if matches!(b.status, BlockStatus::Allocated | BlockStatus::Running | BlockStatus::Done) {
            return Err(ActionError::new(
                "block_used",
                format!("block {bid} is already allocated to {}", super::checks::opt_str(&b.job_id)),
            ));
        }
        check_tradeable(world, b, lab_id, true)?;
        check_fits(b, job)?;
        energy += b.energy_cost * b.hours() as f64;
    }
    let budget = world.labs[lab_id].budget;
    if energy > budget + 1e-9 {
        return Err(ActionError::new(
            "insufficient_budget",
            format!("energy {} exceeds your budget {}", money(energy), money(budget)),
        ));
    }
    let jid = job.job_id.clone();
    // `if job.coalition_id`: an empty id counts as none
    let pooled = job.coalition_id.as_deref().is_some_and(|c| !c.is_empty());
    allocate_now(world, lab_id, Some(&jid), &blocks);
    let mut affected = if pooled { coalition_peers(world, lab_id) } else { BTreeSet::new() };
    affected.insert(lab_id.to_string());
    Ok(Outcome::new("allocation", affected, format!("allocated {} to {jid}", blocks.join(", ")), 0))
}

/// `promised_blocks`: the lab's blocks committed to a coalition still gathering consents that it
/// has consented to (as proposer or member).
pub fn promised_blocks(world: &World, lab_id: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for c in world.coalitions.values() {
        if c.status == CoalitionStatus::Proposed && c.has_consented(lab_id) {
            if let Some(bids) = c.commitments.get(lab_id) {
                out.extend(bids.iter().cloned());
            }
        }
    }
    out
}

/// `auto_allocate`: allocate the lab's plannable blocks (or just `only`) by its best plan (finish,
/// final settlement, and `allocate_to_job` without a job); the ids of the blocks allocated.
pub fn auto_allocate(world: &mut World, lab_id: &str, only: Option<&[String]>) -> Vec<String> {
    allocate_plan(world, lab_id, only, &BTreeSet::new()).0
}

/// `allocate_plan`: allocate the lab's best plan (or its blocks in `only`), leaving the plan's
/// blocks in `keep` free; the ids allocated and the plan's ids kept, sorted. The plan is worked
/// out once.
pub fn allocate_plan(
    world: &mut World,
    lab_id: &str,
    only: Option<&[String]>,
    keep: &BTreeSet<String>,
) -> (Vec<String>, Vec<String>) {
    let plan = best_allocation(world, lab_id, &[], &[]);
    let mut kept: Vec<String> = plan.assignment.keys().filter(|bid| keep.contains(*bid)).cloned().collect();
    kept.sort();
    // the plan's assignment grouped by job, jobs and blocks in the plan's order
    let mut by_job: Vec<(String, Vec<String>)> = Vec::new();
    for (bid, jid) in plan.assignment.iter() {
        if only.is_none_or(|o| o.contains(bid)) && !keep.contains(bid) {
            match by_job.iter_mut().find(|(j, _)| j == jid) {
                Some((_, bids)) => bids.push(bid.clone()),
                None => by_job.push((jid.clone(), vec![bid.clone()])),
            }
        }
    }
    let mut done = Vec::new();
    for (jid, bids) in &by_job {
        for bid in bids {
            let b = &mut world.blocks[bid.as_str()];
            if b.status == BlockStatus::Reserved {
                b.status = BlockStatus::Free;
            }
        }
        done.extend(allocate_now(world, lab_id, Some(jid), bids));
    }
    (done, kept)
}
