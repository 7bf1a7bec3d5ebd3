//! The five opponent archetypes, mirroring `gpu_arena.policies.archetypes`: each a
//! [`Negotiator`] whose parameters lean its own way (`__init__`), and, for the deceptive one, the
//! steps it overrides (`defect`, `talk`); the retaliatory one's `answer_offers` lives with the
//! base method it extends (`Negotiator::answer_offers`).

use indexmap::IndexMap;

use super::negotiator::{py_max, py_min, Archetype, Negotiator, NegotiatorParams};
use crate::rng::PyRandom;
use crate::types::Action;
use crate::value::PyValue;
use crate::views::SeatView;

/// `core.worldgen.ARCHETYPES`: the archetypes a world assigns, in its order.
pub const ARCHETYPES: [&str; 5] = ["cooperative", "selfish", "deadline_panicked", "deceptive", "retaliatory"];

/// The archetype policy `name` (or the base `negotiator`) built as `make_policy(name, seed=seed,
/// **params)` builds it: `params` are a lab's world parameters (keys the constructors do not take
/// are ignored), each archetype leaning them its own way. None: no such policy.
pub fn make_negotiator(name: &str, rng: PyRandom, params: &IndexMap<String, f64>) -> Option<Negotiator> {
    let archetype = Archetype::parse(name)?;
    let mut p = NegotiatorParams::default();
    let get = |key: &str, default: f64| params.get(key).copied().unwrap_or(default);
    p.acceptance_margin = get("acceptance_margin", p.acceptance_margin);
    p.deadline_sensitivity = get("deadline_sensitivity", p.deadline_sensitivity);
    p.honesty = get("honesty", p.honesty);
    p.coalition_trust = get("coalition_trust", p.coalition_trust);
    p.retaliation_memory = get("retaliation_memory", p.retaliation_memory);
    p.risk = get("risk", p.risk);
    match archetype {
        Archetype::Negotiator => {}
        // CooperativePolicy: fair deals, ready commitments, the truth always
        Archetype::Cooperative => {
            p.acceptance_margin *= 0.3;
            p.coalition_trust = py_min(1.0, p.coalition_trust * 1.4);
            p.honesty = 1.0;
        }
        // SelfishPolicy: a large share of every deal
        Archetype::Selfish => {
            p.acceptance_margin = py_max(0.3, p.acceptance_margin * 3.0);
            p.coalition_trust *= 0.5;
            p.risk *= 0.6;
        }
        // DeadlinePanickedPolicy: calm early, desperate late
        Archetype::DeadlinePanicked => {
            p.deadline_sensitivity = py_max(2.0, p.deadline_sensitivity * 2.5);
        }
        // DeceptivePolicy: its own honesty default is 0.5, before the lean
        Archetype::Deceptive => {
            p.honesty = get("honesty", 0.5) * 0.4;
            p.coalition_trust *= 0.6;
        }
        // RetaliatoryPolicy: remembers longer
        Archetype::Retaliatory => {
            p.retaliation_memory = py_max(3.0, p.retaliation_memory * 1.5);
        }
    }
    Some(Negotiator::new(archetype, rng, &p))
}

impl Negotiator {
    /// `DeceptivePolicy.defect`: withdraw from a formed coalition whose pool cannot complete the
    /// job, when its trust fails (a breach: reputation and reward pay for it).
    pub fn defect(&mut self, obs: &SeatView) -> Option<Action> {
        let me = &obs.controlled_lab_id;
        for c in &obs.active_coalitions {
            if c.status != "formed" || !c.members.contains(me) || c.proposer == *me {
                continue;
            }
            // the draw is made only for a pool short of its hours (Python's `or` short-circuits)
            if c.pooled_hours >= c.gpu_hours_required || self.rng.random() < self.coalition_trust {
                continue;
            }
            let mine: Vec<PyValue> = c
                .commitments
                .get(me)
                .map_or(&[][..], |v| v.as_slice())
                .iter()
                .filter(|b| {
                    obs.owned_blocks.iter().rev().find(|o| o.block_id == **b).is_some_and(|o| {
                        o.status == "committed" && o.start_round > obs.round_index
                    })
                })
                .map(|b| PyValue::Str(b.clone()))
                .collect();
            if !mine.is_empty() {
                let mut a = Action::of("release_capacity");
                a.block_ids = PyValue::Tuple(mine);
                return Some(a);
            }
        }
        None
    }

    /// `DeceptivePolicy.talk`: every third round, its open demand, inflated when it lies.
    pub fn deceptive_talk(&mut self, obs: &SeatView) -> Option<Action> {
        if obs.round_index.rem_euclid(3) != 1 {
            return None;
        }
        let open: Vec<_> = obs.private_jobs.iter().filter(|j| j.status == "open").collect();
        if open.is_empty() {
            return None;
        }
        let mut need: i64 = open.iter().map(|j| j.gpu_hours_required - j.assigned_hours).sum();
        if self.rng.random() >= self.honesty {
            need = need * 2 + 8; // inflate demand to talk prices up
        }
        let mut a = Action::of("send_message");
        a.message = PyValue::Str(format!("We still need {need} GPU-hours and will pay well for them."));
        Some(a)
    }
}
