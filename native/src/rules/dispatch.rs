//! `gpu_arena.core.rules.dispatch`: one seat's action applied to the world: the handler of each
//! action type, and the actions that touch nothing but the seat (messages, waiting, finishing).

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::auctions::{counter_pitch, make_pitch};
use super::checks::{coalition_peers, message_text, target_lab};
use super::coalitions::{commit, form_coalition};
use super::holdings::{allocate, auto_allocate, release, reserve};
use super::limits::ACTION_TYPES;
use super::offers::{accept_offer, counter_offer, reject_offer, send_offer};
use super::outcome::{ActionError, Outcome, RuleResult};
use crate::types::{Action, CoalitionStatus, Message, OfferStatus, World};
use crate::value::{py_strip, PyValue};

/// `apply_action`: validate and apply `action` for `lab_id`; an error changes nothing.
pub fn apply_action(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    if world.done {
        return Err(ActionError::new("episode_done", "the episode is over"));
    }
    let kind = match action.kind() {
        Some(kind) if ACTION_TYPES.contains(&kind) => kind,
        _ => {
            return Err(ActionError::new(
                "unknown_action_type",
                format!("unknown action_type {}; expected one of {}", action.action_type.repr(),
                        ACTION_TYPES.join(", ")),
            ))
        }
    };
    if world.labs[lab_id].finished && kind != "wait" {
        return Err(ActionError::new("seat_finished", format!("{lab_id} has finished; it can only wait")));
    }
    // `_HANDLERS[action.action_type]`
    match kind {
        "send_offer" => send_offer(world, lab_id, action),
        "accept_offer" => accept_offer(world, lab_id, action),
        "reject_offer" => reject_offer(world, lab_id, action),
        "counter_offer" => counter_offer(world, lab_id, action),
        "make_pitch" => make_pitch(world, lab_id, action),
        "counter_pitch" => counter_pitch(world, lab_id, action),
        "reserve_capacity" => reserve(world, lab_id, action),
        "release_capacity" => release(world, lab_id, action),
        "form_coalition" => form_coalition(world, lab_id, action),
        "commit_to_coalition" => commit(world, lab_id, action),
        "allocate_to_job" => allocate(world, lab_id, action),
        "send_message" => send_message(world, lab_id, action),
        "wait" => wait(world, lab_id, action),
        "finish" => finish(world, lab_id, action),
        _ => unreachable!("every action type has a handler"),
    }
}

/// `_send_message`: a message to one lab, or to all.
fn send_message(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let target = match action.target_lab_id {
        PyValue::None => None,
        ref id => Some(target_lab(world, id, lab_id, "target_lab_id")?),
    };
    let text = message_text(&action.message)?;
    if py_strip(&text).is_empty() {
        return Err(ActionError::new("empty_message", "message is empty"));
    }
    world.messages.push(Message { round_index: world.round_index, sender: lab_id.to_string(), target, text });
    Ok(Outcome::note("message sent"))
}

/// `_wait`.
fn wait(_world: &mut World, _lab_id: &str, _action: &Action) -> RuleResult<Outcome> {
    Ok(Outcome::note("waited"))
}

/// `_finish`: finish negotiating: the server allocates the lab's blocks optimally; its open offers
/// are withdrawn and its open proposals lapse; nothing is forfeited.
fn finish(world: &mut World, lab_id: &str, _action: &Action) -> RuleResult<Outcome> {
    let allocated = auto_allocate(world, lab_id, None);
    world.labs[lab_id].finished = true;
    for o in world.offers.values_mut() {
        if o.status == OfferStatus::Open && o.sender == lab_id {
            o.status = OfferStatus::Withdrawn;
        }
    }
    for c in world.coalitions.values_mut() {
        if c.status == CoalitionStatus::Proposed && c.proposer == lab_id {
            c.status = CoalitionStatus::Expired;
        }
    }
    let mut note = "finished".to_string();
    if !allocated.is_empty() {
        note.push_str(&format!("; allocated {}", allocated.join(", ")));
    }
    let mut affected = coalition_peers(world, lab_id);
    affected.insert(lab_id.to_string());
    Ok(Outcome::new("allocation", affected, note, 0))
}

/// `rules_apply(world, lab_id, action)`: the Python world and action read, the action applied, and
/// `((True, (category, sorted affected, note, breaches)) or (False, (code, message)), state)` (the
/// shape of `py_apply` in `tests/native/helpers_rs.py`).
#[pyfunction]
fn rules_apply(py: Python, world: &PyAny, lab_id: &str, action: &PyAny) -> PyResult<PyObject> {
    let mut w = crate::convert::read_world(world)?;
    let a = crate::convert::read_action(action)?;
    let result: PyObject = match apply_action(&mut w, lab_id, &a) {
        Ok(out) => {
            let affected: Vec<&String> = out.affected.iter().collect();
            (true, (out.category, affected, out.note, out.breaches)).into_py(py)
        }
        Err(e) => (false, (e.code, e.message)).into_py(py),
    };
    Ok(PyTuple::new(py, [result, crate::convert::world_state(py, &w)?]).into())
}

/// The test-facing functions of the rules' action handlers.
pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rules_apply, m)?)?;
    Ok(())
}
