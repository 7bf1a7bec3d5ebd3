//! `gpu_arena.core.rules.checks`: the field checks every action handler shares (amounts, id lists,
//! strings, expiries, conditions) and the ownership and state of the labs, jobs, blocks and offers
//! an action names. Each returns an [`ActionError`] before anything changes.
//!
//! An action's fields hold whatever the seat sent ([`PyValue`]), so each check tests types in the
//! Python order and words its message as Python's f-string would (reprs, type names, `str(float)`).

use std::collections::BTreeSet;

use indexmap::IndexMap;

use super::limits::{CONDITION_KEYS, MAX_CONDITIONS, MAX_LIST, MAX_MESSAGE_CHARS, MAX_PAYMENT};
use super::outcome::{ActionError, RuleResult};
use crate::types::{Block, BlockStatus, CoalitionStatus, Job, JobStatus, Offer, OfferStatus, World};
use crate::value::{py_len, repr_float, PyValue};

/// `str(x)` of an optional id in an f-string: Python writes `None` for a missing one.
pub fn opt_str(x: &Option<String>) -> &str {
    x.as_deref().unwrap_or("None")
}

/// `type(value).__name__` of a field's value.
pub fn type_name(value: &PyValue) -> &'static str {
    value.type_name()
}

/// `f"{x:.2f}"`: the money amounts the messages show.
pub fn money(x: f64) -> String {
    crate::value::format_float(x, ".2f").expect("'.2f' is a spec format_float takes")
}

/// `finite_amount`: a payment-like field as a float in `[0, MAX_PAYMENT]` (None reads as 0).
///
/// Python's `is too large` (an int beyond a float's range) has no branch here: a `PyValue::Int`
/// is an i64, and an int outside it is refused when the action is read.
pub fn finite_amount(value: &PyValue, name: &str) -> RuleResult<f64> {
    let v = match value {
        PyValue::None => return Ok(0.0),
        // `float(int)` rounds to nearest even, as `as f64` does; an i64 never overflows a float
        PyValue::Int(i) => *i as f64,
        PyValue::Float(f) => *f,
        other => {
            return Err(ActionError::new("invalid_type",
                                        format!("{name} must be a number, got {}", type_name(other))))
        }
    };
    if !v.is_finite() {
        // only a float can be non-finite here, and its repr is then nan, inf or -inf
        return Err(ActionError::new("invalid_payment", format!("{name} must be finite, got {}", repr_float(v))));
    }
    if v < 0.0 {
        return Err(ActionError::new(
            "invalid_payment",
            format!("{name} must not be negative (use requested_payment to ask for money)"),
        ));
    }
    if v > MAX_PAYMENT {
        let cap = crate::value::format_float(MAX_PAYMENT, "g").expect("'g' is a spec format_float takes");
        return Err(ActionError::new("invalid_payment", format!("{name} exceeds the cap {cap}")));
    }
    Ok(v)
}

/// `id_list`: a list (or tuple) of distinct string ids, at most `MAX_LIST` of them.
pub fn id_list(value: &PyValue, name: &str, required: bool) -> RuleResult<Vec<String>> {
    let items: &[PyValue] = match value {
        PyValue::None => &[],
        PyValue::List(xs) | PyValue::Tuple(xs) => xs,
        _ => return Err(ActionError::new("invalid_type", format!("{name} must be a list of ids"))),
    };
    if items.len() > MAX_LIST {
        return Err(ActionError::new("list_too_long",
                                    format!("{name} has {} entries; at most {MAX_LIST}", items.len())));
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for x in items {
        match x {
            PyValue::Str(s) => out.push(s.clone()),
            _ => return Err(ActionError::new("invalid_type", format!("{name} must contain only string ids"))),
        }
    }
    // at most MAX_LIST entries: the quadratic test is cheaper than a set
    for (i, a) in out.iter().enumerate() {
        if out[..i].contains(a) {
            return Err(ActionError::new("duplicate_ids", format!("{name} contains duplicated ids")));
        }
    }
    if required && out.is_empty() {
        return Err(ActionError::new("empty_list", format!("{name} must name at least one id")));
    }
    Ok(out)
}

/// `optional_str`: None, or the string the field holds.
pub fn optional_str<'a>(value: &'a PyValue, name: &str) -> RuleResult<Option<&'a str>> {
    match value {
        PyValue::None => Ok(None),
        PyValue::Str(s) => Ok(Some(s)),
        _ => Err(ActionError::new("invalid_type", format!("{name} must be a string"))),
    }
}

/// `message_text`: the message (empty where none), at most `MAX_MESSAGE_CHARS` characters.
///
/// Python's `len` counts code points, hence `chars()`. The lone-surrogate check (`json_standard`)
/// has nothing to do here: a Rust `String` cannot hold a lone surrogate, so such a message never
/// reaches the rules as a `PyValue::Str`.
pub fn message_text(value: &PyValue) -> RuleResult<String> {
    let text = optional_str(value, "message")?.unwrap_or("");
    let n = py_len(text);
    if n > MAX_MESSAGE_CHARS {
        return Err(ActionError::new("message_too_long",
                                    format!("message has {n} characters; at most {MAX_MESSAGE_CHARS}")));
    }
    Ok(text.to_string())
}

/// `ttl_rounds`: `expires_in` as a number of rounds in `[1, cap]` (None reads as `default`).
pub fn ttl_rounds(value: &PyValue, default: i64, cap: i64) -> RuleResult<i64> {
    match value {
        PyValue::None => Ok(default),
        PyValue::Int(v) => {
            if 1 <= *v && *v <= cap {
                Ok(*v)
            } else {
                Err(ActionError::new("invalid_expiry", format!("expires_in must be between 1 and {cap}")))
            }
        }
        _ => Err(ActionError::new("invalid_type", "expires_in must be an integer number of rounds")),
    }
}

/// `offer_conditions`: the conditions set to true, in the order they were given.
pub fn offer_conditions(value: &PyValue) -> RuleResult<IndexMap<String, bool>> {
    let items = match value {
        PyValue::None => return Ok(IndexMap::new()),
        PyValue::Dict(items) => items,
        _ => return Err(ActionError::new("invalid_type", "conditions must be an object")),
    };
    if items.len() > MAX_CONDITIONS {
        return Err(ActionError::new("conditions_too_large", format!("at most {MAX_CONDITIONS} conditions")));
    }
    let mut out = IndexMap::new();
    for (k, v) in items {
        let key = match k {
            PyValue::Str(s) if CONDITION_KEYS.contains(&s.as_str()) => s,
            _ => {
                return Err(ActionError::new(
                    "unknown_condition",
                    format!("unknown condition {}; known: {}", k.repr(), CONDITION_KEYS.join(", ")),
                ))
            }
        };
        match v {
            PyValue::Bool(true) => {
                out.insert(key.clone(), true);
            }
            PyValue::Bool(false) => {}
            _ => {
                return Err(ActionError::new("invalid_type",
                                            format!("condition {} must be true or false", k.repr())))
            }
        }
    }
    Ok(out)
}

/// `target_lab`: another lab of the world, named by the field `what`.
pub fn target_lab(world: &World, lab_id: &PyValue, actor: &str, what: &str) -> RuleResult<String> {
    let lid = match optional_str(lab_id, what)? {
        None => return Err(ActionError::new("missing_field", format!("{what} is required"))),
        Some(lid) => lid,
    };
    if !world.labs.contains_key(lid) {
        return Err(ActionError::new("unknown_lab", format!("no lab {}", lab_id.repr())));
    }
    if lid == actor {
        return Err(ActionError::new("self_trade", "a lab cannot trade or pitch against itself"));
    }
    Ok(lid.to_string())
}

/// `own_job`: one of the actor's open jobs (None where the field is empty and not `required`).
pub fn own_job<'w>(world: &'w World, job_id: &PyValue, actor: &str, required: bool) -> RuleResult<Option<&'w Job>> {
    let jid = match optional_str(job_id, "job_id")? {
        None if required => return Err(ActionError::new("missing_field", "job_id is required")),
        None => return Ok(None),
        Some(jid) => jid,
    };
    let job = match world.jobs.get(jid) {
        Some(job) if job.owner == actor => job,
        _ => return Err(ActionError::new("unknown_job", format!("you have no job {}", job_id.repr()))),
    };
    if job.status != JobStatus::Open {
        return Err(ActionError::new("job_closed",
                                    format!("job {jid} has already settled ({})", job.status.as_str())));
    }
    Ok(Some(job))
}

/// `block_named`: the block with that id.
pub fn block_named<'w>(world: &'w World, block_id: &str) -> RuleResult<&'w Block> {
    world.blocks.get(block_id).ok_or_else(|| {
        ActionError::new("unknown_block", format!("no block {}", PyValue::Str(block_id.to_string()).repr()))
    })
}

/// `check_tradeable`: `b` is `owner`'s, not started, and free (or reserved, where allowed).
pub fn check_tradeable(world: &World, b: &Block, owner: &str, allow_reserved: bool) -> RuleResult<()> {
    let id = &b.block_id;
    if b.owner.as_deref() != Some(owner) {
        return Err(ActionError::new("block_not_owned", format!("block {id} is not owned by {owner}")));
    }
    if b.status == BlockStatus::Failed {
        return Err(ActionError::new("block_failed", format!("block {id} has failed")));
    }
    if b.start_round <= world.round_index {
        return Err(ActionError::new("block_started",
                                    format!("block {id}'s window has started (round {})", b.start_round)));
    }
    if b.status == BlockStatus::Reserved && !allow_reserved {
        return Err(ActionError::new("block_reserved", format!("block {id} is reserved; release it first")));
    }
    if b.status == BlockStatus::Committed {
        return Err(ActionError::new(
            "block_committed",
            format!("block {id} is committed to coalition {}", opt_str(&b.coalition_id)),
        ));
    }
    if !b.status.plannable() {
        return Err(ActionError::new("block_not_tradeable", format!("block {id} is {}", b.status.as_str())));
    }
    Ok(())
}

/// `check_unconditioned`: a block bought under no_resale or must_allocate_to_job stays with its
/// buyer, whichever side of a new offer names it.
pub fn check_unconditioned(b: &Block) -> RuleResult<()> {
    if b.no_resale {
        return Err(ActionError::new("no_resale",
                                    format!("block {} was bought with a no-resale condition", b.block_id)));
    }
    if b.must_allocate {
        return Err(ActionError::new(
            "no_resale",
            format!("block {} was bought on condition that it runs for its buyer's job", b.block_id),
        ));
    }
    Ok(())
}

/// `check_fits`: `b` ends by `job`'s deadline and is reliable enough for it.
pub fn check_fits(b: &Block, job: &Job) -> RuleResult<()> {
    if b.end_round() > job.deadline_round {
        return Err(ActionError::new(
            "block_too_late",
            format!("block {} ends at round {}, after job {}'s deadline", b.block_id, b.end_round(), job.job_id),
        ));
    }
    if b.reliability < job.min_reliability {
        return Err(ActionError::new(
            "block_unreliable",
            format!("block {} reliability {} is below job {}'s floor", b.block_id, repr_float(b.reliability),
                    job.job_id),
        ));
    }
    Ok(())
}

/// `open_offer`: the offer named by `offer_id` (in whatever state).
pub fn open_offer<'w>(world: &'w World, offer_id: &PyValue) -> RuleResult<&'w Offer> {
    let oid = match optional_str(offer_id, "offer_id")? {
        None => return Err(ActionError::new("missing_field", "offer_id is required")),
        Some(oid) => oid,
    };
    world.offers.get(oid).ok_or_else(|| ActionError::new("unknown_offer", format!("no offer {}", offer_id.repr())))
}

/// `require_open`: the offer is open and not past its expiry.
pub fn require_open(world: &World, offer: &Offer) -> RuleResult<()> {
    if offer.status != OfferStatus::Open || world.round_index >= offer.expires_round {
        let state = if offer.status != OfferStatus::Open { offer.status } else { OfferStatus::Expired };
        return Err(ActionError::new("offer_not_open", format!("offer {} is {}", offer.offer_id, state.as_str())));
    }
    Ok(())
}

/// `in_common_coalition`: `a` and `b` are members of one formed coalition.
pub fn in_common_coalition(world: &World, a: &str, b: &str) -> bool {
    world.coalitions.values().any(|c| {
        c.status == CoalitionStatus::Formed && c.members.iter().any(|m| m == a) && c.members.iter().any(|m| m == b)
    })
}

/// `coalition_peers`: every member (the lab included) of the formed coalitions `lab_id` is in.
pub fn coalition_peers(world: &World, lab_id: &str) -> BTreeSet<String> {
    let mut peers = BTreeSet::new();
    for c in world.coalitions.values() {
        if c.status == CoalitionStatus::Formed && c.members.iter().any(|m| m == lab_id) {
            peers.extend(c.members.iter().cloned());
        }
    }
    peers
}
