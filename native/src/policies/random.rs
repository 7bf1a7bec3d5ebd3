//! `gpu_arena.core.policy.RandomPolicy` (`random_valid`): uniformly random over action types, with
//! arguments drawn from what the view shows. Every draw is the Python policy's, in its order
//! (keyword arguments are evaluated left to right, conditions short-circuit before drawing).

use crate::rng::PyRandom;
use crate::types::Action;
use crate::value::{ordered_sum, py_round, PyValue};
use crate::views::{BlockView, SeatView};

use super::negotiator::PolicyError;

/// The action types it picks among (`send_offer`, `accept_offer` and `allocate_to_job` twice).
const KINDS: [&str; 17] = [
    "send_offer", "send_offer", "accept_offer", "accept_offer", "reject_offer", "counter_offer",
    "make_pitch", "counter_pitch", "reserve_capacity", "release_capacity", "form_coalition",
    "commit_to_coalition", "allocate_to_job", "allocate_to_job", "send_message", "wait", "finish_rare",
];
const MESSAGES: [&str; 4] = ["hello", "need GPUs by round 5", "selling a block", "deal?"];
const CONDITIONS: [&str; 3] = ["must_allocate_to_job", "no_resale", "coalition_only"];

/// `RandomPolicy(seed, invalid_rate, risk)`.
#[derive(Clone, Debug)]
pub struct RandomPolicy {
    pub rng: PyRandom,
    pub invalid_rate: f64,
    pub risk: f64,
}

fn text(s: &str) -> PyValue {
    PyValue::Str(s.to_string())
}

fn ids<'a>(xs: impl IntoIterator<Item = &'a String>) -> PyValue {
    PyValue::Tuple(xs.into_iter().map(|x| text(x)).collect())
}

fn err(e: crate::rng::RandError) -> PolicyError {
    PolicyError { kind: "ValueError", message: e.to_string() }
}

impl RandomPolicy {
    pub fn new(rng: PyRandom, invalid_rate: f64, risk: f64) -> Self {
        RandomPolicy { rng, invalid_rate, risk }
    }

    fn choice(&mut self, n: usize) -> Result<usize, PolicyError> {
        self.rng.choice_index(n).map_err(err)
    }

    fn sample(&mut self, n: usize, k: usize) -> Result<Vec<usize>, PolicyError> {
        self.rng.sample_indices(n, k).map_err(err)
    }

    fn randint(&mut self, a: i64, b: i64) -> Result<i64, PolicyError> {
        self.rng.randint(a, b).map_err(err)
    }

    /// `RandomPolicy.act`.
    pub fn act(&mut self, obs: &SeatView) -> Result<Action, PolicyError> {
        let me = &obs.controlled_lab_id;
        if self.invalid_rate != 0.0 && self.rng.random() < self.invalid_rate {
            return self.garbage(obs);
        }
        let others: Vec<&String> =
            obs.visible_labs.iter().filter(|l| l.lab_id != *me && !l.finished).map(|l| &l.lab_id).collect();
        let mine: Vec<&String> = obs.owned_blocks.iter().filter(|b| b.tradeable).map(|b| &b.block_id).collect();
        let market: Vec<&BlockView> = obs
            .public_market
            .blocks
            .iter()
            .filter(|b| b.tradeable && b.owner.as_ref().is_some_and(|o| others.contains(&o)))
            .collect();
        let jobs: Vec<&crate::views::JobView> = obs.private_jobs.iter().filter(|j| j.status == "open").collect();
        let incoming: Vec<&crate::views::OfferView> =
            obs.active_offers.iter().filter(|o| o.direction == "incoming").collect();
        let budget = obs.controlled_lab_budget;
        let pending: Vec<&String> = obs
            .active_coalitions
            .iter()
            .filter(|c| c.status == "proposed" && !c.consented.contains(me))
            .map(|c| &c.coalition_id)
            .collect();
        if !pending.is_empty() && self.rng.random() < 0.5 {
            let mut a = Action::of("commit_to_coalition");
            a.coalition_id = text(pending[self.choice(pending.len())?]);
            return Ok(a);
        }
        let kind = KINDS[self.choice(KINDS.len())?];
        if kind == "send_offer" && !others.is_empty() {
            let target = others[self.choice(others.len())?];
            let theirs: Vec<&String> =
                market.iter().filter(|b| b.owner.as_ref() == Some(target)).map(|b| &b.block_id).collect();
            let k = self.randint(0, 1)?.min(mine.len() as i64) as usize;
            let give: Vec<&String> = self.sample(mine.len(), k)?.into_iter().map(|i| mine[i]).collect();
            let k = self.randint(0, 2)?.min(theirs.len() as i64) as usize;
            let want: Vec<&String> = self.sample(theirs.len(), k)?.into_iter().map(|i| theirs[i]).collect();
            let pay = if self.rng.random() < 0.5 { py_round(self.rng.uniform(0.0, budget * self.risk), 2) } else { 0.0 };
            let ask = if pay != 0.0 {
                0.0
            } else {
                let v = py_round(self.rng.uniform(0.0, 5.0), 2);
                if self.rng.random() < 0.3 { v } else { v * 0.0 }
            };
            let mut conds = Vec::new();
            for key in CONDITIONS {
                if self.rng.random() < 0.1 {
                    conds.push((text(key), PyValue::Bool(true)));
                }
            }
            let mut a = Action::of("send_offer");
            a.target_lab_id = text(target);
            a.block_ids = ids(give);
            a.payment = PyValue::Float(pay);
            a.requested_payment = PyValue::Float(ask);
            a.conditions = if conds.is_empty() { PyValue::None } else { PyValue::Dict(conds) };
            a.expires_in = PyValue::Int(self.randint(1, 3)?);
            a.job_id = if !jobs.is_empty() && !want.is_empty() {
                text(&jobs[self.choice(jobs.len())?].job_id)
            } else {
                PyValue::None
            };
            a.requested_block_ids = ids(want);
            return Ok(a);
        }
        if matches!(kind, "accept_offer" | "reject_offer" | "counter_offer") && !incoming.is_empty() {
            let o = incoming[self.choice(incoming.len())?];
            if kind == "counter_offer" {
                let mut a = Action::of("counter_offer");
                a.offer_id = text(&o.offer_id);
                a.block_ids = ids(&o.requested_block_ids);
                a.requested_block_ids = ids(&o.block_ids);
                a.payment = PyValue::Float(py_round(o.payment * 0.5, 2));
                return Ok(a);
            }
            let job = if !jobs.is_empty() && kind == "accept_offer" && self.rng.random() < 0.5 {
                text(&jobs[self.choice(jobs.len())?].job_id)
            } else {
                PyValue::None
            };
            let mut a = Action::of(kind);
            a.offer_id = text(&o.offer_id);
            a.job_id = job;
            return Ok(a);
        }
        if matches!(kind, "make_pitch" | "counter_pitch") && !obs.public_market.auctions.is_empty() {
            let auction = &obs.public_market.auctions[0];
            let rivals: Vec<&crate::views::PitchView> = auction.pitches.iter().filter(|p| p.lab_id != *me).collect();
            if kind == "counter_pitch" && !rivals.is_empty() {
                let p = rivals[self.choice(rivals.len())?];
                let mut a = Action::of("counter_pitch");
                a.target_lab_id = text(&p.lab_id);
                a.payment = PyValue::Float(py_round(p.bid + 1.0, 2));
                a.message = text("we need it more");
                return Ok(a);
            }
            let mut a = Action::of("make_pitch");
            a.payment = PyValue::Float(py_round(self.rng.uniform(0.0, budget * self.risk), 2));
            a.job_id = jobs.first().map_or(PyValue::None, |j| text(&j.job_id));
            a.message = text("urgent job");
            return Ok(a);
        }
        if kind == "reserve_capacity" && !mine.is_empty() && !jobs.is_empty() {
            let block = mine[self.choice(mine.len())?];
            let job = &jobs[self.choice(jobs.len())?].job_id;
            let mut a = Action::of("reserve_capacity");
            a.block_ids = ids([block]);
            a.job_id = text(job);
            return Ok(a);
        }
        if kind == "release_capacity" {
            let held: Vec<&String> = obs
                .owned_blocks
                .iter()
                .filter(|b| matches!(b.status.as_str(), "reserved" | "allocated" | "committed"))
                .map(|b| &b.block_id)
                .collect();
            if !held.is_empty() {
                let mut a = Action::of("release_capacity");
                a.block_ids = ids([held[self.choice(held.len())?]]);
                return Ok(a);
            }
        }
        if kind == "form_coalition" {
            let pooled: Vec<&&crate::views::JobView> = jobs.iter().filter(|j| j.pooled).collect();
            if !pooled.is_empty() && !others.is_empty() {
                let job = pooled[0];
                let k = self.randint(1, 2)?.min(others.len() as i64) as usize;
                let members: Vec<&String> = self.sample(others.len(), k)?.into_iter().map(|i| others[i]).collect();
                let want: Vec<&String> = market
                    .iter()
                    .filter(|b| {
                        b.owner.as_ref().is_some_and(|o| members.contains(&o))
                            && b.end_round <= job.deadline_round
                            && b.reliability >= job.min_reliability
                    })
                    .map(|b| &b.block_id)
                    .take(4)
                    .collect();
                let each = py_round(1.0 / (members.len() + 1) as f64, 6);
                let mut shares: Vec<(PyValue, PyValue)> =
                    members.iter().map(|m| (text(m), PyValue::Float(each))).collect();
                let given: Vec<f64> = vec![each; members.len()];
                // a member listed twice would hold one entry: sample draws without repeats
                shares.push((text(me), PyValue::Float(1.0 - ordered_sum(&given))));
                let mut a = Action::of("form_coalition");
                a.job_id = text(&job.job_id);
                a.member_lab_ids = ids(members);
                a.block_ids = ids(mine.iter().take(1).copied());
                a.requested_block_ids = ids(want);
                a.shares = PyValue::Dict(shares);
                return Ok(a);
            }
        }
        if kind == "commit_to_coalition" && !pending.is_empty() {
            let mut a = Action::of("commit_to_coalition");
            a.coalition_id = text(pending[self.choice(pending.len())?]);
            return Ok(a);
        }
        if kind == "allocate_to_job" && !jobs.is_empty() {
            if !obs.best_plan.is_empty() && self.rng.random() < 0.7 {
                let mut plan: Vec<(&String, &Vec<String>)> = obs.best_plan.iter().collect();
                plan.sort();
                let (job_id, blocks) = plan[self.choice(plan.len())?];
                let mut a = Action::of("allocate_to_job");
                a.job_id = text(job_id);
                a.block_ids = ids(blocks);
                return Ok(a);
            }
            if !mine.is_empty() {
                let job = &jobs[self.choice(jobs.len())?].job_id;
                let block = mine[self.choice(mine.len())?];
                let mut a = Action::of("allocate_to_job");
                a.job_id = text(job);
                a.block_ids = ids([block]);
                return Ok(a);
            }
        }
        if kind == "send_message" {
            let target = if !others.is_empty() && self.rng.random() < 0.5 {
                text(others[self.choice(others.len())?])
            } else {
                PyValue::None
            };
            let mut a = Action::of("send_message");
            a.target_lab_id = target;
            a.message = text(MESSAGES[self.choice(MESSAGES.len())?]);
            return Ok(a);
        }
        if kind == "finish_rare" && self.rng.random() < 0.15 {
            return Ok(Action::of("finish"));
        }
        Ok(Action::of("wait"))
    }

    /// `RandomPolicy._garbage`: a deliberately malformed action.
    fn garbage(&mut self, obs: &SeatView) -> Result<Action, PolicyError> {
        let choice = self.rng.randrange_stop(10).map_err(err)?;
        let offer = |target: &str, payment: f64| {
            let mut a = Action::of("send_offer");
            a.target_lab_id = text(target);
            a.payment = PyValue::Float(payment);
            a
        };
        Ok(match choice {
            0 => Action::of("launch_rockets"),
            1 => offer(&obs.controlled_lab_id, 1.0),
            2 => offer("lab_1", f64::NAN),
            3 => {
                let mut a = Action::of("accept_offer");
                a.offer_id = text("o_999999");
                a
            }
            4 => {
                let mut a = Action::of("allocate_to_job");
                a.job_id = text("j_9_9");
                a.block_ids = PyValue::Tuple(vec![text("b_0_0"), text("b_0_0")]);
                a
            }
            5 => {
                let mut a = Action::of("send_message");
                a.message = text(&"x".repeat(5000));
                a
            }
            6 => {
                let mut a = offer("lab_1", -5.0);
                a.block_ids = PyValue::Tuple(Vec::new());
                a
            }
            7 => {
                let mut a = Action::of("reserve_capacity");
                a.block_ids = PyValue::Tuple((0..40).map(|i| text(&format!("b_{i}"))).collect());
                a.job_id = text("j_0_0");
                a
            }
            8 => {
                let mut a = Action::of("make_pitch");
                a.payment = PyValue::Float(f64::INFINITY);
                a
            }
            _ => {
                let mut a = offer("lab_1", 1e12);
                a.conditions = PyValue::Dict(vec![
                    (text("bogus"), PyValue::Bool(true)), (text("a"), PyValue::Int(1)),
                    (text("b"), PyValue::Int(2)), (text("c"), PyValue::Int(3)),
                ]);
                a
            }
        })
    }
}
