//! `gpu_arena.core.rules.auctions`: emergency auctions. Pitches and counter-pitches, and how an
//! auction is awarded: by price, or by the rule judge's scores in judge mode ("rule"). A model
//! judge (`PitchJudge`) stays in Python: the Rust engine runs episodes without one.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::judge::judge_pitches;
use crate::rules::checks::{finite_amount, message_text, own_job, target_lab};
use crate::rules::outcome::{ActionError, Outcome, RuleResult};
use crate::types::{Action, AuctionStatus, BlockStatus, Event, Message, Pitch, World};
use crate::value::{format_float, py_round, py_strip, PyValue};

/// `JUDGE_MODES`.
pub const JUDGE_MODES: [&str; 2] = ["none", "rule"];

/// The `ValueError` Python raises awarding an auction of a world whose judge mode is not one of
/// [`JUDGE_MODES`] (its message).
#[derive(Clone, Debug, PartialEq)]
pub struct UnknownJudgeMode(pub String);

impl std::fmt::Display for UnknownJudgeMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ValueError: {}", self.0)
    }
}

impl From<UnknownJudgeMode> for PyErr {
    fn from(e: UnknownJudgeMode) -> PyErr {
        PyValueError::new_err(e.0)
    }
}

fn money(x: f64) -> String {
    format_float(x, ".2f").expect("'.2f' is a float format spec")
}

/// `_open_auction`: the first auction still taking pitches (its position in `world.auctions`).
fn open_auction(world: &World) -> RuleResult<usize> {
    world.auctions.values()
        .position(|a| a.status == AuctionStatus::Open && world.round_index < a.close_round)
        .ok_or_else(|| ActionError::new("no_contested_resource", "no contested resource is open for pitches"))
}

/// The bid's checks against the pitching lab's budget, its job and its message, in the Python
/// order; returns the job id and the message text.
fn pitch_parts(world: &World, lab_id: &str, action: &Action, bid: f64) -> RuleResult<(Option<String>, String)> {
    if bid > world.labs[lab_id].budget + 1e-9 {
        return Err(ActionError::new("insufficient_budget", format!("bid {} exceeds your budget", money(bid))));
    }
    let job = own_job(world, &action.job_id, lab_id, false)?.map(|j| j.job_id.clone());
    let text = message_text(&action.message)?;
    Ok((job, text))
}

/// `make_pitch`: a first pitch for the open auction.
pub fn make_pitch(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let at = open_auction(world)?;
    if world.auctions[at].pitches.contains_key(lab_id) {
        return Err(ActionError::new("already_pitched", "you have pitched; use counter_pitch to answer or raise"));
    }
    let bid = finite_amount(&action.payment, "payment")?;
    let (job_id, text) = pitch_parts(world, lab_id, action, bid)?;
    let r = world.round_index;
    let auction = &mut world.auctions[at];
    auction.pitches.insert(lab_id.to_string(), Pitch {
        lab_id: lab_id.to_string(), bid, job_id, message: text.clone(), round_index: r, counter_to: None, score: None,
        reasons: Vec::new(),
    });
    let block_id = auction.block_id.clone();
    let said = format!("[pitch {}] {text}", money(bid));
    world.messages.push(Message { round_index: r, sender: lab_id.to_string(), target: None,
                                  text: py_strip(&said).to_string() });
    Ok(Outcome::note(format!("pitched {} for {block_id}", money(bid))))
}

/// `counter_pitch`: a pitch that answers (and outbids) another lab's.
pub fn counter_pitch(world: &mut World, lab_id: &str, action: &Action) -> RuleResult<Outcome> {
    let at = open_auction(world)?;
    let target = target_lab(world, &action.target_lab_id, lab_id, "target_lab_id")?;
    let Some(rival) = world.auctions[at].pitches.get(&target) else {
        return Err(ActionError::new("no_pitch_to_counter", format!("{target} has not pitched")));
    };
    let rival_bid = rival.bid;
    let bid = finite_amount(&action.payment, "payment")?;
    if bid <= rival_bid {
        return Err(ActionError::new("pitch_too_low",
                                    format!("a counter-pitch must bid above {target}'s {}", money(rival_bid))));
    }
    let (job_id, text) = pitch_parts(world, lab_id, action, bid)?;
    let r = world.round_index;
    // a lab that pitched already keeps its place in the pitches' order (a dict assignment)
    world.auctions[at].pitches.insert(lab_id.to_string(), Pitch {
        lab_id: lab_id.to_string(), bid, job_id, message: text.clone(), round_index: r,
        counter_to: Some(target.clone()), score: None, reasons: Vec::new(),
    });
    let said = format!("[counter-pitch {} vs {target}] {text}", money(bid));
    world.messages.push(Message { round_index: r, sender: lab_id.to_string(), target: None,
                                  text: py_strip(&said).to_string() });
    Ok(Outcome::note(format!("counter-pitched {} against {target}", money(bid))))
}

/// Python's `<` between two keys `(x0, x1, lab_id)`: the first pair of items that differ (by
/// `==`) decides, by `<`.
fn key_less(a: (f64, f64, &str), b: (f64, f64, &str)) -> bool {
    if a.0 != b.0 {
        return a.0 < b.0;
    }
    if a.1 != b.1 {
        return a.1 < b.1;
    }
    a.2.cmp(b.2) == Ordering::Less
}

/// `resolve_auctions`: award the contested resources whose pitching window has closed (every open
/// one where `final_`), by bid or by the rule judge; returns the winners. Under the rule judge,
/// every pitch of a closing auction gets its score and reasons, sold or not.
pub fn resolve_auctions(world: &mut World, final_: bool) -> Result<BTreeSet<String>, UnknownJudgeMode> {
    let mut affected = BTreeSet::new();
    let r = world.round_index;
    for at in 0..world.auctions.len() {
        let a = &world.auctions[at];
        if a.status != AuctionStatus::Open || (r < a.close_round && !final_) {
            continue;
        }
        let block_id = a.block_id.clone();
        let auction_id = a.auction_id.clone();
        let valid: Vec<(String, f64)> = a.pitches.values()
            .filter(|p| {
                let lab = &world.labs[&p.lab_id];
                p.bid <= lab.budget + 1e-9 && !lab.finished
            })
            .map(|p| (p.lab_id.clone(), p.bid))
            .collect();
        // `_award_key`: the judge scores every pitch before the sale is decided
        let scores = match world.judge_mode.as_str() {
            "none" => None,
            "rule" => {
                let scores = judge_pitches(world, &world.auctions[at]);
                let auction = &mut world.auctions[at];
                for (lab_id, sc) in &scores {
                    let pitch = auction.pitches.get_mut(lab_id).expect("a score is a pitch's");
                    pitch.score = Some(py_round(sc.score, 6));
                    pitch.reasons = sc.reasons.clone();
                }
                Some(scores)
            }
            other => {
                return Err(UnknownJudgeMode(format!("unknown judge_mode {}; known: {}",
                                                    PyValue::Str(other.to_string()).repr(), JUDGE_MODES.join(", "))));
            }
        };
        if valid.is_empty() || world.blocks[&block_id].start_round <= r {
            world.auctions[at].status = AuctionStatus::Unsold;
            world.blocks[&block_id].status = BlockStatus::Idle;
            world.events.push(Event {
                round_index: r, kind: "auction_unsold".to_string(), text: format!("{block_id} was not sold"),
                data: vec![("auction_id".to_string(), PyValue::Str(auction_id))],
            });
            continue;
        }
        let key = |(lab_id, bid): &(String, f64)| -> (f64, f64, String) {
            match &scores {
                None => (-bid, -world.labs[lab_id].reputation, lab_id.clone()),
                Some(s) => (-s[lab_id].score, -bid, lab_id.clone()),
            }
        };
        // min(): the first of the least keys
        let mut best = &valid[0];
        let mut best_key = key(best);
        for cand in &valid[1..] {
            let k = key(cand);
            if key_less((k.0, k.1, &k.2), (best_key.0, best_key.1, &best_key.2)) {
                best = cand;
                best_key = k;
            }
        }
        let (winner, bid) = best.clone();
        world.labs[&winner].budget -= bid; // paid to the market: money leaves the economy
        let block = &mut world.blocks[&block_id];
        block.owner = Some(winner.clone());
        block.status = BlockStatus::Free;
        let auction = &mut world.auctions[at];
        auction.status = AuctionStatus::Awarded;
        auction.winner = Some(winner.clone());
        auction.price = bid;
        affected.insert(winner.clone());
        world.events.push(Event {
            round_index: r, kind: "auction_awarded".to_string(),
            text: format!("{winner} won {block_id} for {}", money(bid)),
            data: vec![("auction_id".to_string(), PyValue::Str(auction_id)),
                       ("winner".to_string(), PyValue::Str(winner)), ("price".to_string(), PyValue::Float(bid))],
        });
    }
    Ok(affected)
}

// ---------------------------------------------------------------- for the tests

/// `auctions_apply(world, lab_id, action)`: `make_pitch` or `counter_pitch` (by the action's type)
/// on a copy of `world`, in the shape of the tests' `py_apply`: `(True, (category, sorted
/// affected, note, breaches))` or `(False, (code, message))`, and the copy's state after it.
#[pyfunction]
fn auctions_apply(py: Python, world: &PyAny, lab_id: &str, action: &PyAny) -> PyResult<(PyObject, PyObject)> {
    let mut w = crate::convert::read_world(world)?;
    let action = crate::convert::read_action(action)?;
    let handler = match action.kind() {
        Some("make_pitch") => make_pitch,
        Some("counter_pitch") => counter_pitch,
        _ => return Err(PyValueError::new_err("auctions_apply takes make_pitch and counter_pitch only")),
    };
    let result: PyObject = match handler(&mut w, lab_id, &action) {
        Ok(out) => (true, (out.category, out.affected.into_iter().collect::<Vec<_>>(), out.note, out.breaches))
            .into_py(py),
        Err(e) => (false, (e.code, e.message)).into_py(py),
    };
    Ok((result, crate::convert::world_state(py, &w)?))
}

pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(auctions_apply, m)?)?;
    Ok(())
}
