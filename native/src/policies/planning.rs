//! A seat's own what-if pricing of bundles of blocks, from its view alone, mirroring
//! `gpu_arena.policies.planning` (`block_key`, `fits`, `OwnPlanner`).
//!
//! The view's aids price one market block at a time and each open offer; a negotiator that buys
//! several blocks at once must price bundles, with the grader's own exact program
//! (`crate::allocation::solve`) over the seat's open jobs and plannable blocks as its view shows
//! them (its own jobs' values, never another lab's).

use std::collections::HashSet;

use indexmap::IndexMap;

use super::negotiator::py_max;
use crate::allocation::{job_value, solve, BlockKey, JobKey};
use crate::views::{BlockView, JobView, SeatView};

/// `PLANNABLE`, by the view's status text.
fn plannable(status: &str) -> bool {
    status == "free" || status == "reserved"
}

/// `block_key(b)`: the valuation's key of a block view (hours, end round, reliability, energy
/// for all its hours).
pub fn block_key(b: &BlockView) -> BlockKey {
    (b.gpu_hours, b.end_round, b.reliability, b.energy_cost * b.gpu_hours as f64)
}

/// `fits(b, job)`: whether a block counts for a job (its window ends by the deadline and it is
/// reliable enough).
pub fn fits(b: &BlockView, job: &JobView) -> bool {
    b.end_round <= job.deadline_round && b.reliability >= job.min_reliability
}

/// `OwnPlanner`: prices hypothetical holdings for the seat whose view it is built from.
///
/// `net()` equals the view's own plan (value − energy still to pay) for the jobs it prices;
/// `gain(extra, without, pay)` is the change of the seat's potential if it received `extra`, gave
/// up `without` and paid `pay`. `pooled = false` leaves pooled jobs out (priced then with
/// [`OwnPlanner::pooled_value`]).
#[derive(Clone, Debug)]
pub struct OwnPlanner {
    pub round_index: i64,
    pub budget: f64,
    pub jobs: Vec<JobView>,
    pub job_keys: Vec<JobKey>,
    pub blocks: Vec<BlockView>,
}

/// `OwnPlanner.plan`'s result: (value, energy, block id -> job id in the plan's block order).
pub type OwnPlan = (f64, f64, IndexMap<String, String>);

impl OwnPlanner {
    /// `OwnPlanner(obs, pooled=pooled)`.
    pub fn new(obs: &SeatView, pooled: bool) -> Self {
        let jobs: Vec<JobView> =
            obs.private_jobs.iter().filter(|j| j.status == "open" && (pooled || !j.pooled)).cloned().collect();
        let job_keys = jobs
            .iter()
            .map(|j| (j.gpu_hours_required, j.assigned_hours, j.deadline_round, j.min_reliability, j.value * j.share,
                      j.partial_credit))
            .collect();
        let blocks = obs
            .owned_blocks
            .iter()
            .filter(|b| plannable(&b.status) && b.start_round > obs.round_index)
            .cloned()
            .collect();
        OwnPlanner { round_index: obs.round_index, budget: obs.controlled_lab_budget, jobs, job_keys, blocks }
    }

    /// `OwnPlanner.plan(extra, without, money)`: the best plan with `extra` blocks added (those
    /// that open later than now), the blocks named in `without` removed and `money` added to the
    /// budget.
    pub fn plan(&self, extra: &[&BlockView], without: &[&str], money: f64) -> OwnPlan {
        if self.jobs.is_empty() {
            return (0.0, 0.0, IndexMap::new());
        }
        let drop: HashSet<&str> = without.iter().copied().collect();
        let blocks: Vec<&BlockView> = self
            .blocks
            .iter()
            .filter(|b| !drop.contains(b.block_id.as_str()))
            .chain(extra.iter().copied().filter(|b| b.start_round > self.round_index))
            .collect();
        let keys: Vec<BlockKey> = blocks.iter().map(|b| block_key(b)).collect();
        let (value, energy, choices) = solve(&keys, &self.job_keys, py_max(0.0, self.budget + money));
        let mut assignment = IndexMap::new();
        for (b, &k) in blocks.iter().zip(&choices) {
            if k >= 0 {
                // a dict keeps a repeated key's first place and its last value
                assignment.insert(b.block_id.clone(), self.jobs[k as usize].job_id.clone());
            }
        }
        (value, energy, assignment)
    }

    /// `OwnPlanner.net(extra, without, money)`: the plan's value − energy.
    pub fn net(&self, extra: &[&BlockView], without: &[&str], money: f64) -> f64 {
        let (value, energy, _) = self.plan(extra, without, money);
        value - energy
    }

    /// `OwnPlanner.gain(extra, without, pay)`: change of the seat's potential if it got `extra`,
    /// gave `without` and paid `pay`.
    pub fn gain(&self, extra: &[&BlockView], without: &[&str], pay: f64) -> f64 {
        self.net(extra, without, -pay) - self.net(&[], &[], 0.0) - pay
    }

    /// `OwnPlanner.pooled_value(job, hours)`: what the seat realises from its pooled `job` with
    /// `hours` valid hours on it.
    pub fn pooled_value(job: &JobView, hours: i64) -> f64 {
        job_value(job.value * job.share, job.gpu_hours_required, job.partial_credit, hours)
    }
}
