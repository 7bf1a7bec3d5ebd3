//! `gpu_arena.core.rules.offers`: bilateral offers: send, counter, reject and accept (the
//! settlement of an accepted offer).

use std::collections::BTreeSet;

use indexmap::IndexMap;

use super::checks::{
    block_named, check_tradeable, check_unconditioned, coalition_peers, finite_amount, id_list,
    in_common_coalition, message_text, money, offer_conditions, open_offer, own_job, require_open, target_lab,
    ttl_rounds,
};
use super::holdings::allocate_now;
use super::limits::{MAX_OPEN_OFFERS, OFFER_TTL_DEFAULT, OFFER_TTL_MAX, REP_FAIR_DEAL};
use super::outcome::{ActionError, Outcome, RuleResult};
use crate::types::{Action, BlockStatus, Event, Message, Offer, OfferStatus, World};
use crate::valuation::{potential, LabValuer};
use crate::value::PyValue;

/// The terms `_offer_terms` checks and returns (Python's dict of them).
#[derive(Clone, Debug)]
pub struct OfferTerms {
    pub blocks: Vec<String>,
    pub requested: Vec<String>,
    pub payment: f64,
    pub requested_payment: f64,
    pub conditions: IndexMap<String, bool>,
    pub message: String,
    pub ttl: i64,
    pub job_id: Option<String>,
}

fn overlap(a: &[String], b: &[String]) -> bool {
    a.iter().any(|x| b.contains(x))
}

/// `_offer_terms`: the terms of an offer from `sender` to `target`, every field checked.
fn offer_terms(world: &World, sender: &str, target: &str, action: &Action) -> RuleResult<OfferTerms> {
    let blocks = id_list(&action.block_ids, "block_ids", false)?;
    let requested = id_list(&action.requested_block_ids, "requested_block_ids", false)?;
    let payment = finite_amount(&action.payment, "payment")?;
    let requested_payment = finite_amount(&action.requested_payment, "requested_payment")?;
    if payment > 0.0 && requested_payment > 0.0 {
        return Err(ActionError::new("invalid_payment", "set payment or requested_payment, not both"));
    }
    if blocks.is_empty() && requested.is_empty() && payment == 0.0 && requested_payment == 0.0 {
        return Err(ActionError::new("empty_offer", "an offer must give or ask for blocks or money"));
    }
    if overlap(&blocks, &requested) {
        return Err(ActionError::new("duplicate_ids", "a block cannot be both offered and requested"));
    }
    for bid in &blocks {
        let b = block_named(world, bid)?;
        check_tradeable(world, b, sender, false)?;
        check_unconditioned(b)?;
    }
    for bid in &requested {
        let b = block_named(world, bid)?;
        if b.owner.as_deref() != Some(target) {
            return Err(ActionError::new("block_not_owned", format!("block {bid} is not owned by {target}")));
        }
        check_tradeable(world, b, target, false)?;
        check_unconditioned(b)?;
    }
    let budget = world.labs[sender].budget;
    if payment > budget + 1e-9 {
        return Err(ActionError::new(
            "insufficient_budget",
            format!("payment {} exceeds your budget {}", money(payment), money(budget)),
        ));
    }
    if requested_payment > world.labs[target].budget + 1e-9 {
        return Err(ActionError::new("counterparty_cannot_pay",
                                    format!("{target} cannot pay {}", money(requested_payment))));
    }
    let job_id = own_job(world, &action.job_id, sender, false)?.map(|j| j.job_id.clone());
    // the keyword arguments of Python's dict(...), checked in their order
    let conditions = offer_conditions(&action.conditions)?;
    let message = message_text(&action.message)?;
    let ttl = ttl_rounds(&action.expires_in, OFFER_TTL_DEFAULT, OFFER_TTL_MAX)?;
    Ok(OfferTerms { blocks, requested, payment, requested_payment, conditions, message, ttl, job_id })
}

/// `_create_offer`: the offer made, once the sender's open offers and the target allow it.
fn create_offer(world: &mut World, sender: &str, target: &str, terms: OfferTerms, parent: Option<String>)
                -> RuleResult<String> {
    let round = world.round_index;
    let open_count = world
        .offers
        .values()
        .filter(|o| o.sender == sender && o.status == OfferStatus::Open && round < o.expires_round)
        .count();
    if open_count >= MAX_OPEN_OFFERS {
        return Err(ActionError::new("too_many_offers", format!("at most {MAX_OPEN_OFFERS} open offers per lab")));
    }
    if world.labs[target].finished {
        return Err(ActionError::new("lab_finished", format!("{target} has finished and takes no offers")));
    }
    let offer_id = world.new_id("o");
    let message = terms.message;
    let offer = Offer {
        offer_id: offer_id.clone(),
        sender: sender.to_string(),
        target: target.to_string(),
        block_ids: terms.blocks,
        requested_block_ids: terms.requested,
        payment: terms.payment,
        created_round: round,
        // the target first sees the offer next round: it may answer in the next `ttl` rounds
        expires_round: round + 1 + terms.ttl,
        conditions: terms.conditions,
        message: message.clone(),
        status: OfferStatus::Open,
        parent_offer_id: parent,
        settled_round: None,
        requested_payment: terms.requested_payment,
        job_id: terms.job_id,
    };
    world.offers.insert(offer_id.clone(), offer);
    world.labs[sender].offers_made += 1;
    world.labs[target].offers_received += 1;
    if !message.is_empty() {
        world.messages.push(Message { round_index: round, sender: sender.to_string(),
                                      target: Some(target.to_string()), text: message });
    }
    Ok(offer_id)
}

/// `send_offer`.
pub fn send_offer(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let target = target_lab(world, &action.target_lab_id, lab_id, "target_lab_id")?;
    let terms = offer_terms(world, lab_id, &target, action)?;
    let offer_id = create_offer(world, lab_id, &target, terms, None)?;
    Ok(Outcome::note(format!("offer {offer_id} sent to {target}")))
}

/// `counter_offer`: a new offer back to the sender of an open offer addressed to the lab.
pub fn counter_offer(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let original = open_offer(world, &action.offer_id)?;
    if original.target != lab_id {
        return Err(ActionError::new("offer_not_addressed",
                                    format!("offer {} is not addressed to you", original.offer_id)));
    }
    require_open(world, original)?;
    let (original_id, original_sender) = (original.offer_id.clone(), original.sender.clone());
    let terms = offer_terms(world, lab_id, &original_sender, action)?;
    let offer_id = create_offer(world, lab_id, &original_sender, terms, Some(original_id.clone()))?;
    world.offers[original_id.as_str()].status = OfferStatus::Countered;
    Ok(Outcome::note(format!("counter-offer {offer_id} sent to {original_sender}")))
}

/// `reject_offer`: the target rejects an offer, or its sender withdraws it.
pub fn reject_offer(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let offer = open_offer(world, &action.offer_id)?;
    if lab_id != offer.target && lab_id != offer.sender {
        return Err(ActionError::new("offer_not_addressed", format!("offer {} is not yours", offer.offer_id)));
    }
    require_open(world, offer)?;
    let status = if offer.target == lab_id { OfferStatus::Rejected } else { OfferStatus::Withdrawn };
    let offer_id = offer.offer_id.clone();
    world.offers[offer_id.as_str()].status = status;
    Ok(Outcome::note(format!("offer {offer_id} {}", status.as_str())))
}

/// `accept_offer`: settle an open offer addressed to the lab, atomically once every check passed.
pub fn accept_offer(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let offer = open_offer(world, &action.offer_id)?;
    if offer.target != lab_id {
        return Err(ActionError::new("offer_not_addressed",
                                    format!("offer {} is not addressed to you", offer.offer_id)));
    }
    require_open(world, offer)?;
    let (sender, target) = (&world.labs[offer.sender.as_str()], &world.labs[lab_id]);
    if sender.finished {
        return Err(ActionError::new("offer_not_open", format!("{} has finished; its offers are void", offer.sender)));
    }
    for bid in &offer.block_ids {
        let b = block_named(world, bid)?;
        if let Err(e) = check_tradeable(world, b, &offer.sender, false).and_then(|_| check_unconditioned(b)) {
            return Err(ActionError::new("offer_stale", format!("offer can no longer settle: {}", e.message)));
        }
    }
    for bid in &offer.requested_block_ids {
        let b = block_named(world, bid)?;
        check_tradeable(world, b, lab_id, false)?;
        check_unconditioned(b)?;
    }
    let requested_payment = offer.requested_payment;
    if offer.payment > sender.budget + 1e-9 {
        return Err(ActionError::new("offer_stale",
                                    format!("{} can no longer pay {}", offer.sender, money(offer.payment))));
    }
    if requested_payment > target.budget + 1e-9 {
        return Err(ActionError::new("insufficient_budget", format!("you cannot pay {}", money(requested_payment))));
    }
    let cond = |key: &str| offer.conditions.get(key).copied().unwrap_or(false);
    if cond("coalition_only") && !in_common_coalition(world, &offer.sender, lab_id) {
        return Err(ActionError::new("condition_unmet",
                                    "coalition_only: you share no formed coalition with the sender"));
    }
    let my_job = own_job(world, &action.job_id, lab_id, false)?.map(|j| j.job_id.clone());
    let offer = offer.clone();
    let (no_resale, must_allocate) = (cond("no_resale"), cond("must_allocate_to_job"));
    let sender_id = offer.sender.clone();
    let before = (potential(world, &sender_id, None), potential(world, lab_id, None));
    // settle atomically: every check above has passed
    for bid in &offer.block_ids {
        let b = &mut world.blocks[bid.as_str()];
        b.owner = Some(lab_id.to_string());
        b.status = BlockStatus::Free;
        b.reserved_for = None;
        b.no_resale = no_resale;
        b.must_allocate = must_allocate;
    }
    for bid in &offer.requested_block_ids {
        let b = &mut world.blocks[bid.as_str()];
        b.owner = Some(sender_id.clone());
        b.status = BlockStatus::Free;
        b.reserved_for = None;
        b.no_resale = false;
        b.must_allocate = false;
    }
    // the four budget steps in Python's order (each a rounded float operation)
    world.labs[sender_id.as_str()].budget -= offer.payment;
    world.labs[lab_id].budget += offer.payment;
    world.labs[lab_id].budget -= requested_payment;
    world.labs[sender_id.as_str()].budget += requested_payment;
    {
        let o = &mut world.offers[offer.offer_id.as_str()];
        o.status = OfferStatus::Accepted;
        o.settled_round = Some(world.round_index);
    }
    world.labs[sender_id.as_str()].deals += 1;
    world.labs[lab_id].deals += 1;
    // `if offer.job_id`: an empty id counts as none
    let sender_job = offer.job_id.as_deref().filter(|j| !j.is_empty() && world.jobs.contains_key(*j));
    let mut auto = allocate_now(world, &sender_id, sender_job, &offer.requested_block_ids);
    auto.extend(allocate_now(world, lab_id, my_job.as_deref(), &offer.block_ids));
    let mut moved: BTreeSet<String> = offer.block_ids.iter().cloned().collect();
    moved.extend(offer.requested_block_ids.iter().cloned());
    for other in world.offers.values_mut() {
        if other.status == OfferStatus::Open
            && other.block_ids.iter().chain(other.requested_block_ids.iter()).any(|b| moved.contains(b))
        {
            other.status = OfferStatus::Superseded;
        }
    }
    // each side valued once after the deal: its potential now, and the holdings the deal event keeps
    let mut valuers = (LabValuer::new(world, &sender_id, None, None), LabValuer::new(world, lab_id, None, None));
    let after = (potential(world, &sender_id, Some(&mut valuers.0)), potential(world, lab_id, Some(&mut valuers.1)));
    if after.0 >= before.0 - 1e-9 && after.1 >= before.1 - 1e-9 {
        for lid in [sender_id.as_str(), lab_id] {
            let lab = &mut world.labs[lid];
            // min(1.0, x): Python keeps the first of equals
            let rep = lab.reputation + REP_FAIR_DEAL;
            lab.reputation = if rep < 1.0 { rep } else { 1.0 };
        }
    }
    let strs = |xs: Vec<String>| PyValue::List(xs.into_iter().map(PyValue::Str).collect());
    let joint = joint_holdings(&mut valuers.0, &mut valuers.1);
    world.events.push(Event {
        round_index: world.round_index,
        kind: "deal".to_string(),
        text: format!("{sender_id} and {lab_id} settled offer {}", offer.offer_id),
        data: vec![
            ("offer_id".to_string(), PyValue::Str(offer.offer_id.clone())),
            ("labs".to_string(), strs(vec![sender_id.clone(), lab_id.to_string()])),
            // sorted(moved): a BTreeSet iterates in code-point order, as Python sorts strings
            ("blocks".to_string(), strs(moved.into_iter().collect())),
            // what the deal did to each side's potential (the bargaining metrics)
            ("gains".to_string(),
             PyValue::List(vec![PyValue::Float(after.0 - before.0), PyValue::Float(after.1 - before.1)])),
            ("joint".to_string(), joint),
        ],
    });
    let mut note = format!("offer {} settled", offer.offer_id);
    if !auto.is_empty() {
        note.push_str(&format!("; allocated {}", auto.join(", ")));
    }
    let mut affected: BTreeSet<String> = BTreeSet::from([sender_id.clone(), lab_id.to_string()]);
    affected.extend(coalition_peers(world, &sender_id));
    affected.extend(coalition_peers(world, lab_id));
    Ok(Outcome::new("deal", affected, note, 0))
}

/// `joint_holdings`: both labs' plannable blocks and open jobs as valuation keys, their budgets
/// together, and the net value of their two best plans (read by no view; the league computes
/// whether the deal left joint gain on the table from it, off the step).
pub fn joint_holdings(va: &mut LabValuer, vb: &mut LabValuer) -> PyValue {
    let block = |k: &(i64, i64, f64, f64)| {
        PyValue::List(vec![PyValue::Int(k.0), PyValue::Int(k.1), PyValue::Float(k.2), PyValue::Float(k.3)])
    };
    let job = |k: &(i64, i64, i64, f64, f64, f64)| {
        PyValue::List(vec![PyValue::Int(k.0), PyValue::Int(k.1), PyValue::Int(k.2), PyValue::Float(k.3),
                           PyValue::Float(k.4), PyValue::Float(k.5)])
    };
    let blocks = va.block_keys.iter().chain(vb.block_keys.iter()).map(block).collect();
    let jobs = va.job_keys.iter().chain(vb.job_keys.iter()).map(job).collect();
    let budget = va.budget + vb.budget;
    let net = va.plan(&[], &[], 0.0).net() + vb.plan(&[], &[], 0.0).net();
    PyValue::Dict(vec![
        (PyValue::Str("blocks".to_string()), PyValue::List(blocks)),
        (PyValue::Str("jobs".to_string()), PyValue::List(jobs)),
        (PyValue::Str("budget".to_string()), PyValue::Float(budget)),
        (PyValue::Str("net".to_string()), PyValue::Float(net)),
    ])
}
