//! `gpu_arena.core.rules.coalitions`: coalitions for pooled jobs: proposal with shares and
//! commitments, consent, and formation.

use indexmap::IndexMap;

use super::checks::{
    block_named, check_fits, check_tradeable, finite_amount, id_list, message_text, money, optional_str,
    own_job, target_lab, ttl_rounds,
};
use super::limits::{COALITION_TTL_DEFAULT, COALITION_TTL_MAX, MAX_OPEN_PROPOSALS};
use super::outcome::{ActionError, Outcome, RuleResult};
use crate::types::{Action, BlockStatus, Coalition, CoalitionStatus, Event, JobStatus, Message, OfferStatus, World};
use crate::value::{ordered_sum, PyValue};

/// `_shares`: a finite non-negative share for exactly each of `members`, summing to 1, in the
/// order given.
fn shares(value: &PyValue, members: &[String]) -> RuleResult<IndexMap<String, f64>> {
    let items = match value {
        PyValue::Dict(items) => items,
        _ => {
            return Err(ActionError::new("invalid_shares",
                                        "shares must map every member (and you) to a fraction"))
        }
    };
    // set(value) == set(members): the members are distinct strings and a dict's keys are distinct,
    // so the key set equals them when it is as large and every key is a member
    let covers = items.len() == members.len()
        && items.iter().all(|(k, _)| matches!(k, PyValue::Str(s) if members.contains(s)));
    if !covers {
        let mut sorted: Vec<&str> = members.iter().map(|m| m.as_str()).collect();
        sorted.sort();
        return Err(ActionError::new("invalid_shares", format!("shares must cover exactly {}", sorted.join(", "))));
    }
    let mut out = IndexMap::new();
    for (k, v) in items {
        let key = match k {
            PyValue::Str(s) => s,
            _ => unreachable!("every key is a member"),
        };
        // an i64 always converts to a finite float (Python's OverflowError needs a larger int)
        let share = match v {
            PyValue::Int(i) if *i >= 0 => Some(*i as f64),
            PyValue::Float(x) if x.is_finite() && *x >= 0.0 => Some(*x),
            _ => None,
        };
        match share {
            Some(x) => {
                out.insert(key.clone(), x);
            }
            None => {
                return Err(ActionError::new("invalid_shares",
                                            format!("share for {key} must be a finite non-negative number")))
            }
        }
    }
    let total = ordered_sum(&out.values().copied().collect::<Vec<f64>>());
    if (total - 1.0).abs() > 1e-6 {
        return Err(ActionError::new("invalid_shares", "shares must sum to 1"));
    }
    Ok(out)
}

/// `form_coalition`: propose a coalition for one of the lab's pooled jobs.
pub fn form_coalition(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let job = own_job(world, &action.job_id, lab_id, true)?.expect("a required job");
    if !job.pooled {
        return Err(ActionError::new("job_not_poolable", format!("job {} is not a pooled job", job.job_id)));
    }
    if world.coalitions.values().any(|c| c.job_id == job.job_id && c.status == CoalitionStatus::Formed) {
        return Err(ActionError::new("coalition_exists",
                                    format!("job {} already has a formed coalition", job.job_id)));
    }
    let members = id_list(&action.member_lab_ids, "member_lab_ids", true)?;
    for m in &members {
        target_lab(world, &PyValue::Str(m.clone()), lab_id, "member_lab_ids")?;
        if world.labs[m.as_str()].finished {
            return Err(ActionError::new("lab_finished", format!("{m} has finished")));
        }
    }
    let own = id_list(&action.block_ids, "block_ids", false)?;
    let requested = id_list(&action.requested_block_ids, "requested_block_ids", true)?;
    if own.iter().any(|b| requested.contains(b)) {
        return Err(ActionError::new("duplicate_ids", "a block cannot be listed twice"));
    }
    let all: Vec<String> = std::iter::once(lab_id.to_string()).chain(members.iter().cloned()).collect();
    let mut commitments: IndexMap<String, Vec<String>> = all.iter().map(|m| (m.clone(), Vec::new())).collect();
    for bid in &own {
        let b = block_named(world, bid)?;
        check_tradeable(world, b, lab_id, false)?;
        check_fits(b, job)?;
        commitments[lab_id].push(bid.clone());
    }
    for bid in &requested {
        let b = block_named(world, bid)?;
        let owner = match b.owner.as_deref() {
            Some(o) if members.iter().any(|m| m == o) => o,
            _ => {
                return Err(ActionError::new("block_not_owned", format!("block {bid} is not owned by a member")))
            }
        };
        check_tradeable(world, b, owner, false)?;
        check_fits(b, job)?;
        commitments[owner].push(bid.clone());
    }
    for m in &members {
        if commitments[m.as_str()].is_empty() {
            return Err(ActionError::new("member_without_blocks", format!("{m} is asked to commit no block")));
        }
    }
    let shares = shares(&action.shares, &all)?;
    let payment = finite_amount(&action.payment, "payment")?;
    if payment > world.labs[lab_id].budget + 1e-9 {
        return Err(ActionError::new("insufficient_budget",
                                    format!("payment {} exceeds your budget", money(payment))));
    }
    let ttl = ttl_rounds(&action.expires_in, COALITION_TTL_DEFAULT, COALITION_TTL_MAX)?;
    let text = message_text(&action.message)?;
    let open_props = world
        .coalitions
        .values()
        .filter(|c| c.proposer == lab_id && c.status == CoalitionStatus::Proposed)
        .count();
    if open_props >= MAX_OPEN_PROPOSALS {
        return Err(ActionError::new("too_many_proposals",
                                    format!("at most {MAX_OPEN_PROPOSALS} open coalition proposals")));
    }
    let job_id = job.job_id.clone();
    let cid = world.new_id("c");
    let round = world.round_index;
    world.coalitions.insert(cid.clone(), Coalition {
        coalition_id: cid.clone(),
        proposer: lab_id.to_string(),
        members: all,
        job_id,
        commitments,
        payment,
        shares,
        created_round: round,
        expires_round: round + 1 + ttl,
        consented: vec![lab_id.to_string()],
        status: CoalitionStatus::Proposed,
        breaches: Vec::new(),
        excused: Vec::new(),
    });
    if !text.is_empty() {
        for m in &members {
            world.messages.push(Message { round_index: round, sender: lab_id.to_string(), target: Some(m.clone()),
                                          text: text.clone() });
        }
    }
    Ok(Outcome::note(format!("coalition {cid} proposed to {}", members.join(", "))))
}

/// `commit`: a member consents to a proposed coalition; the last consent forms it (or fails it).
pub fn commit(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let cid = match optional_str(&action.coalition_id, "coalition_id")? {
        None => return Err(ActionError::new("missing_field", "coalition_id is required")),
        Some(cid) => cid.to_string(),
    };
    let c = match world.coalitions.get(cid.as_str()) {
        None => {
            return Err(ActionError::new("unknown_coalition",
                                        format!("no coalition {}", PyValue::Str(cid.clone()).repr())))
        }
        Some(c) => c,
    };
    if !c.members.iter().any(|m| m == lab_id) {
        return Err(ActionError::new("not_a_member", format!("you are not a member of {cid}")));
    }
    if c.status != CoalitionStatus::Proposed || world.round_index >= c.expires_round {
        let state = if c.status != CoalitionStatus::Proposed { c.status.as_str() } else { "expired" };
        return Err(ActionError::new("coalition_not_open", format!("coalition {cid} is {state}")));
    }
    if c.has_consented(lab_id) {
        return Err(ActionError::new("already_committed", format!("you have already committed to {cid}")));
    }
    let job = &world.jobs[c.job_id.as_str()];
    let mine: &[String] = c.commitments.get(lab_id).map_or(&[], |v| v.as_slice());
    for bid in mine {
        let b = block_named(world, bid)?;
        check_tradeable(world, b, lab_id, false)?;
        check_fits(b, job)?;
    }
    let energy = ordered_sum(&mine.iter().map(|b| {
        let b = &world.blocks[b.as_str()];
        b.energy_cost * b.hours() as f64
    }).collect::<Vec<f64>>());
    if energy > world.labs[lab_id].budget + 1e-9 {
        return Err(ActionError::new(
            "insufficient_budget",
            format!("you cannot pay the energy ({}) of your committed blocks", money(energy)),
        ));
    }
    let c = &mut world.coalitions[cid.as_str()];
    c.consent(lab_id);
    let waiting: Vec<&str> = c.members.iter().filter(|m| !c.has_consented(m)).map(|m| m.as_str()).collect();
    if !waiting.is_empty() {
        return Ok(Outcome::note(format!("committed to {cid}; waiting for {}", waiting.join(", "))));
    }
    let problem = formation_problem(world, &cid);
    if !problem.is_empty() {
        world.coalitions[cid.as_str()].status = CoalitionStatus::Failed;
        world.events.push(Event {
            round_index: world.round_index,
            kind: "coalition_failed".to_string(),
            text: format!("coalition {cid} could not form: {problem}"),
            data: vec![("coalition_id".to_string(), PyValue::Str(cid.clone()))],
        });
        return Ok(Outcome::note(format!("coalition {cid} could not form: {problem}")));
    }
    form(world, &cid);
    let members = world.coalitions[cid.as_str()].members.clone();
    Ok(Outcome::new("coalition", members, format!("coalition {cid} formed"), 0))
}

/// `_formation_problem`: why the coalition `cid`, consented by all, cannot form now ("" if it can).
fn formation_problem(world: &World, cid: &str) -> String {
    let c = &world.coalitions[cid];
    let job = &world.jobs[c.job_id.as_str()];
    if job.status != JobStatus::Open {
        return "the pooled job has settled".to_string();
    }
    if world.coalitions.values().any(|o| o.status == CoalitionStatus::Formed && o.job_id == c.job_id) {
        return "the job already has a coalition".to_string();
    }
    for (m, blocks) in &c.commitments {
        let mut energy = 0.0;
        for bid in blocks {
            let b = &world.blocks[bid.as_str()];
            if let Err(e) = check_tradeable(world, b, m, false).and_then(|_| check_fits(b, job)) {
                return e.message;
            }
            energy += b.energy_cost * b.hours() as f64;
        }
        let paying = if *m == c.proposer { c.payment } else { 0.0 };
        if energy > world.labs[m.as_str()].budget + 1e-9 - paying {
            return format!("{m} cannot pay its energy");
        }
    }
    if c.payment > world.labs[c.proposer.as_str()].budget + 1e-9 {
        return format!("{} cannot pay {}", c.proposer, money(c.payment));
    }
    String::new()
}

/// `_form`: the coalition `cid` forms: the proposer pays the others by their pooled hours, each
/// member's committed blocks are prepaid and held for the pooled job.
fn form(world: &mut World, cid: &str) {
    let c = world.coalitions[cid].clone();
    let job_id = c.job_id.clone();
    let others: Vec<&String> = c.members.iter().filter(|m| **m != c.proposer).collect();
    let hours: Vec<i64> = others
        .iter()
        .map(|m| c.commitments[m.as_str()].iter().map(|b| world.blocks[b.as_str()].hours()).sum())
        .collect();
    let total_hours: i64 = hours.iter().sum();
    world.labs[c.proposer.as_str()].budget -= c.payment;
    for (m, h) in others.iter().zip(&hours) {
        // int / int is a correctly rounded division, as the division of the (exact) floats is
        let part = if total_hours != 0 { *h as f64 / total_hours as f64 } else { 1.0 / others.len() as f64 };
        world.labs[m.as_str()].budget += c.payment * part;
    }
    for (m, blocks) in &c.commitments {
        let lab = &mut world.labs[m.as_str()];
        lab.commitments += blocks.len() as i64;
        for bid in blocks {
            let b = &mut world.blocks[bid.as_str()];
            let energy = b.energy_cost * b.hours() as f64;
            lab.budget -= energy;
            lab.energy_paid += energy;
            b.energy_paid = energy;
            b.status = BlockStatus::Committed;
            b.job_id = Some(job_id.clone());
            b.coalition_id = Some(cid.to_string());
            b.reserved_for = None;
        }
    }
    world.jobs[job_id.as_str()].coalition_id = Some(cid.to_string());
    world.coalitions[cid].status = CoalitionStatus::Formed;
    let committed: Vec<&String> = c.commitments.values().flatten().collect();
    for o in world.offers.values_mut() {
        if o.status == OfferStatus::Open
            && o.block_ids.iter().chain(o.requested_block_ids.iter()).any(|b| committed.contains(&b))
        {
            o.status = OfferStatus::Superseded;
        }
    }
    world.events.push(Event {
        round_index: world.round_index,
        kind: "coalition_formed".to_string(),
        text: format!("coalition {cid} formed by {}", c.members.join(", ")),
        data: vec![
            ("coalition_id".to_string(), PyValue::Str(cid.to_string())),
            ("members".to_string(), PyValue::List(c.members.iter().cloned().map(PyValue::Str).collect())),
        ],
    });
}
