//! `gpu_arena.core.shocks`: market shocks. Drawn into a hidden schedule at world generation; each
//! fires at the start of its round, draws its target from the episode RNG (`world.rng`, drawn in
//! the Python order so the stream stays in step) and is announced as a public event then, never
//! before.

use std::collections::BTreeSet;

use crate::rng::Weights;
use crate::types::{Auction, AuctionStatus, Block, BlockStatus, Event, JobStatus, ScheduledShock, World};
use crate::value::{format_float, py_round, repr_float, PyValue};

/// `SHOCK_KINDS`, in the order of `_apply`'s table.
pub const SHOCK_KINDS: [&str; 7] = [
    "capacity_failure", "new_supply", "energy_spike", "reliability_downgrade", "deadline_acceleration",
    "demand_surge", "emergency_auction",
];

/// What Python raises firing a shock of a world the generator never makes (an unknown kind, a
/// weight total the RNG refuses): the exception's name and message.
pub type ShockError = String;

/// `_LIVE`: the statuses of a block a shock may hit.
fn live(status: BlockStatus) -> bool {
    matches!(status, BlockStatus::Free | BlockStatus::Reserved | BlockStatus::Allocated | BlockStatus::Committed
                     | BlockStatus::Running)
}

/// `fire_due_shocks`: apply every scheduled shock for the current round; returns the labs it may
/// have affected.
pub fn fire_due_shocks(world: &mut World) -> Result<BTreeSet<String>, ShockError> {
    let mut affected = BTreeSet::new();
    // no handler touches the schedule, so the due shocks can be taken up front
    let due: Vec<ScheduledShock> =
        world.shock_schedule.iter().filter(|s| s.round_index == world.round_index).cloned().collect();
    for shock in &due {
        affected.extend(apply(world, shock)?);
    }
    Ok(affected)
}

/// `_apply`: the handler of the shock's kind.
fn apply(world: &mut World, shock: &ScheduledShock) -> Result<BTreeSet<String>, ShockError> {
    match shock.kind.as_str() {
        "capacity_failure" => capacity_failure(world, shock),
        "new_supply" => new_supply(world, shock),
        "energy_spike" => Ok(energy_spike(world, shock)),
        "reliability_downgrade" => reliability_downgrade(world, shock),
        "deadline_acceleration" => deadline_acceleration(world, shock),
        "demand_surge" => demand_surge(world, shock),
        "emergency_auction" => emergency_auction(world, shock),
        other => Err(format!("KeyError: {}", PyValue::Str(other.to_string()).repr())),
    }
}

/// `_announce`: a public event whose data starts with `shock: True`.
fn announce(world: &mut World, kind: &str, text: String, data: Vec<(&str, PyValue)>) {
    let mut all = vec![("shock".to_string(), PyValue::Bool(true))];
    all.extend(data.into_iter().map(|(k, v)| (k.to_string(), v)));
    world.events.push(Event { round_index: world.round_index, kind: kind.to_string(), text, data: all });
}

fn rand_err(e: crate::rng::RandError) -> ShockError {
    format!("{e:?}")
}

/// The block ids of `candidates` (owned, live blocks), in world order.
fn live_owned(world: &World) -> Vec<String> {
    world.blocks.values().filter(|b| b.owner.is_some() && live(b.status)).map(|b| b.block_id.clone()).collect()
}

/// `_capacity_failure`: a live block fails, unreliable ones more often; its prepaid energy comes
/// back and a coalition commitment it carried is excused.
fn capacity_failure(world: &mut World, _shock: &ScheduledShock) -> Result<BTreeSet<String>, ShockError> {
    let candidates = live_owned(world);
    if candidates.is_empty() {
        return Ok(BTreeSet::new());
    }
    let weights: Vec<f64> = candidates.iter().map(|id| 1.05 - world.blocks[id].reliability).collect();
    let pick = world.rng.choices_indices(candidates.len(), Weights::Relative(&weights), 1).map_err(rand_err)?[0];
    let bid = candidates[pick].clone();
    let b = world.blocks[&bid].clone();
    let owner = b.owner.clone().unwrap_or_default();
    // `if b.owner`: an owner is tested for truth, so an empty id counts as none
    let mut affected = BTreeSet::new();
    if !owner.is_empty() {
        affected.insert(owner.clone());
        // Python tests `b.energy_paid` for truth: any nonzero amount (NaN included) is refunded
        if matches!(b.status, BlockStatus::Allocated | BlockStatus::Committed) && b.energy_paid != 0.0 {
            let lab = world.labs.get_mut(&owner).expect("a block's owner is a lab");
            lab.budget += b.energy_paid; // a block that never runs costs no energy
            lab.energy_paid -= b.energy_paid;
            world.blocks[&bid].energy_paid = 0.0;
        }
    }
    if let (Some(cid), BlockStatus::Committed) = (&b.coalition_id, b.status) {
        let c = world.coalitions.get_mut(cid).expect("a committed block's coalition exists");
        c.excused.push(owner.clone()); // a shock excuses the commitment: not a breach
        affected.extend(c.members.iter().cloned());
    }
    if let Some(jid) = &b.job_id {
        if let Some(cid) = world.jobs.get(jid).and_then(|j| j.coalition_id.clone()) {
            affected.extend(world.coalitions[&cid].members.iter().cloned());
        }
    }
    world.blocks[&bid].status = BlockStatus::Failed;
    announce(world, "capacity_failure", format!("block {bid} of {owner} failed"),
             vec![("block_id", PyValue::Str(bid.clone())), ("lab", PyValue::Str(owner))]);
    Ok(affected)
}

/// `_new_block_id`: `b_<prefix><n>` with the world's next id number.
fn new_block_id(world: &mut World, prefix: &str) -> String {
    let id = world.new_id("");
    format!("b_{prefix}{}", &id[1..])
}

/// `Block(...)` with the dataclass defaults for the fields a shock leaves out.
fn fresh_block(block_id: String, owner: Option<String>, gpu_count: i64, start_round: i64, duration: i64,
               reliability: f64, energy_cost: f64, status: BlockStatus) -> Block {
    Block {
        block_id, owner, gpu_count, start_round, duration, reliability, energy_cost, status,
        job_id: None, reserved_for: None, coalition_id: None, no_resale: false, must_allocate: false,
        energy_paid: 0.0,
    }
}

/// `_new_supply`: a new block for a lab drawn at random.
fn new_supply(world: &mut World, _shock: &ScheduledShock) -> Result<BTreeSet<String>, ShockError> {
    let mut labs = world.lab_ids();
    labs.sort(); // UTF-8 byte order is code point order: Python's sorted()
    let owner = world.rng.choice(&labs).map_err(rand_err)?.clone();
    let r = world.round_index;
    // the arguments in Python's evaluation order: the id first, then each draw left to right
    let block_id = new_block_id(world, "s");
    let rng = &mut world.rng;
    let gpu_count = *rng.choice(&[2i64, 4, 8]).map_err(rand_err)?;
    let start_round = r + rng.randint(1, 3).map_err(rand_err)?;
    let duration = rng.randint(1, 3).map_err(rand_err)?;
    let reliability = py_round(rng.uniform(0.8, 0.99), 3);
    let energy_cost = py_round(rng.uniform(0.15, 0.5), 3);
    let b = fresh_block(block_id.clone(), Some(owner.clone()), gpu_count, start_round, duration, reliability,
                        energy_cost, BlockStatus::Free);
    world.blocks.insert(block_id.clone(), b);
    announce(world, "new_supply", format!("new block {block_id} ({gpu_count} GPUs) went to {owner}"),
             vec![("block_id", PyValue::Str(block_id)), ("lab", PyValue::Str(owner.clone()))]);
    Ok(BTreeSet::from([owner]))
}

/// `_energy_spike`: unallocated blocks not yet started cost more energy.
fn energy_spike(world: &mut World, shock: &ScheduledShock) -> BTreeSet<String> {
    let mut affected = BTreeSet::new();
    let r = world.round_index;
    for b in world.blocks.values_mut() {
        if matches!(b.status, BlockStatus::Free | BlockStatus::Reserved | BlockStatus::Auction) && b.start_round > r {
            b.energy_cost = py_round(b.energy_cost * shock.magnitude, 4);
            if let Some(owner) = &b.owner {
                // `if b.owner:` — an empty owner string is falsy
                if !owner.is_empty() {
                    affected.insert(owner.clone());
                }
            }
        }
    }
    let text = format!("energy prices of unallocated blocks rose x{}", format_float(shock.magnitude, ".2f").expect(".2f"));
    announce(world, "energy_spike", text, vec![("factor", PyValue::Float(shock.magnitude))]);
    affected
}

/// `_reliability_downgrade`: a live block's reliability falls.
fn reliability_downgrade(world: &mut World, shock: &ScheduledShock) -> Result<BTreeSet<String>, ShockError> {
    let candidates = live_owned(world);
    if candidates.is_empty() {
        return Ok(BTreeSet::new());
    }
    let bid = world.rng.choice(&candidates).map_err(rand_err)?.clone();
    let b = world.blocks.get_mut(&bid).expect("a candidate is a block");
    let fallen = b.reliability - shock.magnitude;
    // max(0.3, x): 0.3 unless x is greater
    b.reliability = py_round(if fallen > 0.3 { fallen } else { 0.3 }, 3);
    let reliability = b.reliability;
    let b = b.clone();
    let mut affected = BTreeSet::new();
    if let Some(owner) = b.owner.as_ref().filter(|o| !o.is_empty()) {
        affected.insert(owner.clone());
    }
    if let Some(jid) = b.job_id.as_ref().filter(|j| !j.is_empty()) {
        // `world.jobs[b.job_id]`: a block's job exists; `if ...coalition_id:` tests truth
        if let Some(cid) = world.jobs[jid].coalition_id.as_ref().filter(|c| !c.is_empty()) {
            affected.extend(world.coalitions[cid].members.iter().cloned());
        }
    }
    announce(world, "reliability_downgrade", format!("block {bid} reliability fell to {}", repr_float(reliability)),
             vec![("block_id", PyValue::Str(bid.clone())), ("reliability", PyValue::Float(reliability))]);
    Ok(affected)
}

/// `_deadline_acceleration`: an open job's deadline moves earlier.
fn deadline_acceleration(world: &mut World, shock: &ScheduledShock) -> Result<BTreeSet<String>, ShockError> {
    let r = world.round_index;
    let candidates: Vec<String> = world.jobs.values()
        .filter(|j| j.status == JobStatus::Open && j.deadline_round > r + 1)
        .map(|j| j.job_id.clone())
        .collect();
    if candidates.is_empty() {
        return Ok(BTreeSet::new());
    }
    let jid = world.rng.choice(&candidates).map_err(rand_err)?.clone();
    let job = world.jobs.get_mut(&jid).expect("a candidate is a job");
    // int(x) truncates toward zero, as `as` does for the finite magnitudes a schedule holds
    let moved = job.deadline_round - 1 - (shock.magnitude * 2.0) as i64;
    job.deadline_round = std::cmp::max(r + 1, moved);
    let job = job.clone();
    let mut affected = BTreeSet::from([job.owner.clone()]);
    if let Some(cid) = job.coalition_id.as_ref().filter(|c| !c.is_empty()) {
        affected.extend(world.coalitions[cid].members.iter().cloned());
    }
    // which job and how much is private to its owner; the public learns only whose
    announce(world, "deadline_acceleration", format!("a deadline of {} moved earlier", job.owner),
             vec![("lab", PyValue::Str(job.owner.clone()))]);
    Ok(affected)
}

/// `_demand_surge`: an open job not yet surged is worth more.
fn demand_surge(world: &mut World, shock: &ScheduledShock) -> Result<BTreeSet<String>, ShockError> {
    let candidates: Vec<String> = world.jobs.values()
        .filter(|j| j.status == JobStatus::Open && !j.surged)
        .map(|j| j.job_id.clone())
        .collect();
    if candidates.is_empty() {
        return Ok(BTreeSet::new());
    }
    let jid = world.rng.choice(&candidates).map_err(rand_err)?.clone();
    let job = world.jobs.get_mut(&jid).expect("a candidate is a job");
    job.value = py_round(job.value * shock.magnitude, 2);
    job.surged = true;
    let job = job.clone();
    let mut affected = BTreeSet::from([job.owner.clone()]);
    if let Some(cid) = job.coalition_id.as_ref().filter(|c| !c.is_empty()) {
        affected.extend(world.coalitions[cid].members.iter().cloned());
    }
    announce(world, "demand_surge", format!("demand surged for a job of {}", job.owner),
             vec![("lab", PyValue::Str(job.owner.clone()))]);
    Ok(affected)
}

/// `_emergency_auction`: a new 8-GPU block goes to auction, pitches close two rounds on.
fn emergency_auction(world: &mut World, _shock: &ScheduledShock) -> Result<BTreeSet<String>, ShockError> {
    let r = world.round_index;
    let block_id = new_block_id(world, "a");
    let rng = &mut world.rng;
    let duration = rng.randint(1, 2).map_err(rand_err)?;
    let reliability = py_round(rng.uniform(0.9, 0.99), 3);
    let energy_cost = py_round(rng.uniform(0.15, 0.35), 3);
    let b = fresh_block(block_id.clone(), None, 8, r + 3, duration, reliability, energy_cost, BlockStatus::Auction);
    world.blocks.insert(block_id.clone(), b);
    let auction_id = world.new_id("a");
    let close_round = r + 2;
    world.auctions.insert(auction_id.clone(), Auction {
        auction_id: auction_id.clone(), block_id: block_id.clone(), opened_round: r, close_round,
        pitches: Default::default(), status: AuctionStatus::Open, winner: None, price: 0.0,
    });
    announce(world, "emergency_auction",
             format!("emergency auction for {block_id}: pitch (make_pitch) before round {close_round}"),
             vec![("block_id", PyValue::Str(block_id)), ("auction_id", PyValue::Str(auction_id)),
                  ("close_round", PyValue::Int(close_round))]);
    Ok(BTreeSet::new())
}

