//! Valuation, mirroring `gpu_arena.core.valuation`: a lab's best allocation of its blocks to its
//! jobs ([`LabValuer`], on the DP of `crate::allocation`) and its potential.

use std::collections::HashSet;

use indexmap::IndexMap;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::allocation::{self, extra_price, extra_prices, job_value, lock, BlockKey, FrontierCache, JobKey, SharedFrontier};
use crate::types::{Block, CoalitionStatus, Job, JobStatus, World};

/// `block_fits`: whether `block` counts for `job` (ends by its deadline, reliable enough).
pub fn block_fits(block: &Block, job: &Job) -> bool {
    block.end_round() <= job.deadline_round && block.reliability >= job.min_reliability
}

/// `Plan`: a lab's best use of its plannable blocks: job value reachable and energy still to pay,
/// and the job each used block serves (block id -> job id, in block order).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub value: f64,
    pub energy: f64,
    pub assignment: IndexMap<String, String>,
}

impl Plan {
    /// `Plan.net`.
    pub fn net(&self) -> f64 {
        self.value - self.energy
    }
}

/// `valid_hours`: hours already assigned to `job` that will count at settlement.
pub fn valid_hours(world: &World, job: &Job) -> i64 {
    let mut total = 0;
    for b in world.blocks.values() {
        if b.job_id.as_deref() == Some(job.job_id.as_str()) && b.status.assigned() && block_fits(b, job) {
            total += b.hours();
        }
    }
    total
}

/// `owner_share`: the owner's share of a pooled job's value (1.0 for its own job).
pub fn owner_share(world: &World, job: &Job) -> f64 {
    match &job.coalition_id {
        None => 1.0,
        Some(cid) => world.coalitions[cid.as_str()].shares.get(&job.owner).copied().unwrap_or(0.0),
    }
}

/// `block_key`: (hours, end round, reliability, energy of all its hours).
pub fn block_key(b: &Block) -> BlockKey {
    (b.hours(), b.end_round(), b.reliability, b.energy_cost * b.hours() as f64)
}

/// `LabValuer`: prices hypothetical holdings for one lab; the jobs side is taken once, blocks vary.
///
/// It copies what it prices when built (the lab's open jobs and plannable blocks, their keys, its
/// budget and the round), never borrowing the world: a valuer prices the state it was built on,
/// and the rules change the world between pricings.
pub struct LabValuer {
    pub round_index: i64,
    pub budget: f64,
    pub jobs: Vec<Job>,
    pub blocks: Vec<Block>,
    pub block_keys: Vec<BlockKey>,
    pub job_keys: Vec<JobKey>,
    base: Option<(f64, f64, IndexMap<String, String>)>,
    frontier: Option<SharedFrontier>,
    frontiers: Option<FrontierCache>,
}

impl LabValuer {
    /// `LabValuer(world, lab_id, budget, frontiers)`.
    pub fn new(world: &World, lab_id: &str, budget: Option<f64>, frontiers: Option<FrontierCache>) -> Self {
        let r = world.round_index;
        let jobs: Vec<Job> =
            world.jobs.values().filter(|j| j.owner == lab_id && j.status == JobStatus::Open).cloned().collect();
        // valid hours per job, by position (a lab has a few jobs: a scan beats hashing the ids)
        let mut hours = vec![0i64; jobs.len()];
        let mut blocks = Vec::new();
        // one pass over the blocks: the lab's plannable ones, and valid hours already on its jobs
        for b in world.blocks.values() {
            let mine = b.job_id.as_deref().and_then(|jid| jobs.iter().position(|j| j.job_id == jid));
            match mine {
                Some(at) if b.status.assigned() => {
                    if block_fits(b, &jobs[at]) {
                        hours[at] += b.hours();
                    }
                }
                _ => {
                    if b.owner.as_deref() == Some(lab_id) && b.status.plannable() && b.start_round > r {
                        blocks.push(b.clone());
                    }
                }
            }
        }
        Self::setup(world, lab_id, budget, jobs, blocks, &hours, frontiers)
    }

    /// `LabValuer.from_parts`: a valuer from inputs already gathered for this world state (the
    /// lab's open `jobs` and plannable `blocks`, in world order, and the valid `hours` on each job).
    pub fn from_parts(
        world: &World,
        lab_id: &str,
        jobs: Vec<Job>,
        blocks: Vec<Block>,
        hours: &IndexMap<String, i64>,
        frontiers: Option<FrontierCache>,
    ) -> Self {
        let hours: Vec<i64> = jobs.iter().map(|j| hours[j.job_id.as_str()]).collect();
        Self::setup(world, lab_id, None, jobs, blocks, &hours, frontiers)
    }

    fn setup(
        world: &World,
        lab_id: &str,
        budget: Option<f64>,
        jobs: Vec<Job>,
        blocks: Vec<Block>,
        hours: &[i64],
        frontiers: Option<FrontierCache>,
    ) -> Self {
        let block_keys = blocks.iter().map(block_key).collect();
        let job_keys = jobs
            .iter()
            .zip(hours)
            .map(|(j, &h)| {
                (j.gpu_hours_required, h, j.deadline_round, j.min_reliability, j.value * owner_share(world, j),
                 j.partial_credit)
            })
            .collect();
        LabValuer {
            round_index: world.round_index,
            budget: budget.unwrap_or(world.labs[lab_id].budget),
            jobs,
            blocks,
            block_keys,
            job_keys,
            base: None,
            frontier: None,
            frontiers,
        }
    }

    /// `LabValuer.plan`: the best plan with `extra` blocks, without `without`, and `money` added
    /// to the budget.
    pub fn plan(&mut self, extra: &[Block], without: &[&str], money: f64) -> Plan {
        if self.jobs.is_empty() {
            return Plan { value: 0.0, energy: 0.0, assignment: IndexMap::new() };
        }
        let drop: HashSet<&str> = without.iter().copied().collect();
        let extra: Vec<&Block> = extra.iter().filter(|b| b.start_round > self.round_index).collect();
        if drop.is_empty() && extra.is_empty() && money == 0.0 {
            let (value, energy, assignment) = self.best();
            return Plan { value, energy, assignment: assignment.clone() };
        }
        let extra_keys: Vec<BlockKey> = extra.iter().map(|b| block_key(b)).collect();
        let keys = self.keys(&drop, &extra_keys);
        let (value, energy, choices) = self.solve_keys(&keys, money);
        let blocks = self.blocks.iter().filter(|b| !drop.contains(b.block_id.as_str())).chain(extra.iter().copied());
        let mut assignment = IndexMap::new();
        for (b, &k) in blocks.zip(choices.iter()) {
            if k >= 0 {
                assignment.insert(b.block_id.clone(), self.jobs[k as usize].job_id.clone());
            }
        }
        Plan { value, energy, assignment }
    }

    /// `LabValuer.best`: [`LabValuer::plan`] as (value, energy, assignment), solved once per valuer.
    pub fn best(&mut self) -> (f64, f64, &IndexMap<String, String>) {
        if self.base.is_none() {
            let base = if self.jobs.is_empty() {
                (0.0, 0.0, IndexMap::new())
            } else {
                let (value, energy, choices) = self.solve_own();
                let mut assignment = IndexMap::new();
                for (b, &k) in self.blocks.iter().zip(choices.iter()) {
                    if k >= 0 {
                        assignment.insert(b.block_id.clone(), self.jobs[k as usize].job_id.clone());
                    }
                }
                (value, energy, assignment)
            };
            self.base = Some(base);
        }
        let base = self.base.as_ref().expect("just set");
        (base.0, base.1, &base.2)
    }

    /// `LabValuer.totals`: (value, energy) of the best plan, without building its assignment.
    pub fn totals(&mut self) -> (f64, f64) {
        if self.jobs.is_empty() {
            return (0.0, 0.0);
        }
        if let Some(base) = &self.base {
            return (base.0, base.1);
        }
        let (value, energy, _choices) = self.solve_own();
        (value, energy)
    }

    /// `LabValuer._solve`: the best plan of the blocks `keys` for its jobs, `money` added to the budget.
    fn solve_keys(&self, keys: &[BlockKey], money: f64) -> allocation::Plan {
        let fr = allocation::frontier(keys, &self.job_keys, self.frontiers.as_ref());
        let budget = self.budget + money;
        let out = lock(&fr).solve(if budget > 0.0 { budget } else { 0.0 });
        out
    }

    /// `LabValuer._own`: the frontier of its own blocks and jobs, kept.
    fn own(&mut self) -> SharedFrontier {
        if self.frontier.is_none() {
            self.frontier = Some(allocation::frontier(&self.block_keys, &self.job_keys, self.frontiers.as_ref()));
        }
        self.frontier.clone().expect("just set")
    }

    /// `LabValuer._solve_own`: the best assignment of its own blocks at its own budget.
    fn solve_own(&mut self) -> allocation::Plan {
        let fr = self.own();
        let budget = self.budget + 0.0;
        let out = lock(&fr).solve(if budget > 0.0 { budget } else { 0.0 });
        out
    }

    /// `LabValuer._keys`: the keys of its blocks but `drop`, then `extra` (read from the keys taken
    /// when the valuer was built).
    fn keys(&self, drop: &HashSet<&str>, extra: &[BlockKey]) -> Vec<BlockKey> {
        if drop.is_empty() && extra.is_empty() {
            return self.block_keys.clone();
        }
        self.blocks
            .iter()
            .zip(&self.block_keys)
            .filter(|(b, _)| !drop.contains(b.block_id.as_str()))
            .map(|(_, k)| *k)
            .chain(extra.iter().copied())
            .collect()
    }

    /// `LabValuer.net`: the best net value with `extra` blocks, without `without`, `money` added.
    pub fn net(&mut self, extra: &[Block], without: &[&str], money: f64) -> f64 {
        let extra: Vec<(i64, BlockKey)> = extra.iter().map(|b| (b.start_round, block_key(b))).collect();
        self.net_of(&extra, without, money)
    }

    /// `LabValuer.net_of`: [`LabValuer::net`] with the extra blocks as (start round, block key).
    pub fn net_of(&mut self, extra: &[(i64, BlockKey)], without: &[&str], money: f64) -> f64 {
        let drop: HashSet<&str> = without.iter().copied().collect();
        if extra.len() == 1 && drop.is_empty() && money == 0.0 && !self.jobs.is_empty() {
            let (start, key) = extra[0];
            if start <= self.round_index {
                let (value, energy, _) = self.best();
                return value - energy;
            }
            let fr = self.own();
            let out = extra_price(&mut lock(&fr), &key, self.budget).0;
            return out;
        }
        if self.jobs.is_empty() {
            return 0.0;
        }
        let keys: Vec<BlockKey> = extra.iter().filter(|(s, _)| *s > self.round_index).map(|(_, k)| *k).collect();
        if drop.is_empty() && keys.is_empty() && money == 0.0 {
            let (value, energy, _) = self.best();
            return value - energy;
        }
        let (value, energy, _choices) = self.solve_keys(&self.keys(&drop, &keys), money);
        value - energy
    }

    /// `LabValuer.job_for`: the job `block` would serve in this lab's best plan if it held it.
    pub fn job_for(&mut self, block: &Block) -> Option<String> {
        if self.jobs.is_empty() || block.start_round <= self.round_index {
            return None;
        }
        let fr = self.own();
        let (_best, k) = extra_price(&mut lock(&fr), &block_key(block), self.budget);
        if k >= 0 {
            Some(self.jobs[k as usize].job_id.clone())
        } else {
            None
        }
    }

    /// `LabValuer.extra_prices`: for each of `blocks` (all starting after this round), its
    /// `net(extra=[b])` and `job_for(b)`; `keys` may pass their block keys.
    pub fn extra_prices(&mut self, blocks: &[Block], keys: Option<&[BlockKey]>) -> Vec<(f64, Option<String>)> {
        match keys {
            Some(k) => self.prices_of(k),
            None => {
                let k: Vec<BlockKey> = blocks.iter().map(block_key).collect();
                self.prices_of(&k)
            }
        }
    }

    /// `LabValuer.prices_of`: [`LabValuer::extra_prices`] of blocks given by their keys alone.
    pub fn prices_of(&mut self, keys: &[BlockKey]) -> Vec<(f64, Option<String>)> {
        if self.jobs.is_empty() {
            return vec![(0.0, None); keys.len()];
        }
        let fr = self.own();
        let prices = extra_prices(&mut lock(&fr), keys, self.budget);
        prices
            .into_iter()
            .map(|(best, k)| (best, if k >= 0 { Some(self.jobs[k as usize].job_id.clone()) } else { None }))
            .collect()
    }

    /// `LabValuer.net_without`: `net(without=(blocks[i].block_id,))`, by position.
    pub fn net_without(&mut self, i: usize) -> f64 {
        if self.jobs.is_empty() {
            return 0.0;
        }
        let (base_value, base_energy, choices) = self.solve_own();
        if choices[i] < 0 {
            // the best plan does not use block i, so it stays feasible and optimal without it
            return base_value - base_energy;
        }
        let mut keys = self.block_keys.clone();
        keys.remove(i);
        let (value, energy, _choices) = self.solve_keys(&keys, 0.0);
        value - energy
    }
}

/// `best_allocation`: the lab's optimal allocation of its plannable blocks (plus `extra`, minus `without`).
pub fn best_allocation(world: &World, lab_id: &str, extra: &[Block], without: &[&str]) -> Plan {
    LabValuer::new(world, lab_id, None, None).plan(extra, without, 0.0)
}

/// `member_share_value`: the value a lab expects from formed coalitions on other labs' jobs, at
/// the hours pooled so far (`hours` may pass every job's valid hours for this world state).
pub fn member_share_value(world: &World, lab_id: &str, hours: Option<&IndexMap<String, i64>>) -> f64 {
    let mut total = 0.0;
    for c in world.coalitions.values() {
        if c.status != CoalitionStatus::Formed || !c.shares.contains_key(lab_id) {
            continue;
        }
        let job = &world.jobs[c.job_id.as_str()];
        if job.owner == lab_id || job.status != JobStatus::Open {
            continue;
        }
        let pooled = match hours {
            None => valid_hours(world, job),
            Some(h) => h[job.job_id.as_str()],
        };
        total += c.shares[lab_id] * job_value(job.value, job.gpu_hours_required, job.partial_credit, pooled);
    }
    total
}

/// `potential_parts`: Φ split into (value part, money part); `plan` may pass the best plan.
pub fn potential_parts(world: &World, lab_id: &str, plan: Option<&Plan>) -> (f64, f64) {
    match plan {
        Some(p) => parts_of(world, lab_id, p.value, p.energy),
        None => {
            let p = best_allocation(world, lab_id, &[], &[]);
            parts_of(world, lab_id, p.value, p.energy)
        }
    }
}

/// `parts_of`: [`potential_parts`] given the best plan's value and energy.
pub fn parts_of(world: &World, lab_id: &str, plan_value: f64, plan_energy: f64) -> (f64, f64) {
    let lab = &world.labs[lab_id];
    (lab.realized_value + plan_value + member_share_value(world, lab_id, None), lab.budget - plan_energy)
}

/// `potential`: Φ of the lab; `valuer` may pass its valuer already built on this world state.
pub fn potential(world: &World, lab_id: &str, valuer: Option<&mut LabValuer>) -> f64 {
    let plan = valuer.map(|v| v.plan(&[], &[], 0.0));
    let (v, m) = potential_parts(world, lab_id, plan.as_ref());
    v + m
}

// ---------------------------------------------------------------------------- test functions

fn world_of(world: &PyAny) -> PyResult<World> {
    crate::convert::read_world(world)
}

fn blocks_of(w: &World, ids: &[String]) -> Vec<Block> {
    ids.iter().map(|id| w.blocks[id.as_str()].clone()).collect()
}

fn plan_py(py: Python, p: &Plan) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    for (k, v) in &p.assignment {
        d.set_item(k, v)?;
    }
    Ok((p.value, p.energy, d).into_py(py))
}

#[pyfunction]
fn valuation_block_fits(world: &PyAny, block_id: &str, job_id: &str) -> PyResult<bool> {
    let w = world_of(world)?;
    Ok(block_fits(&w.blocks[block_id], &w.jobs[job_id]))
}

#[pyfunction]
fn valuation_valid_hours(world: &PyAny, job_id: &str) -> PyResult<i64> {
    let w = world_of(world)?;
    Ok(valid_hours(&w, &w.jobs[job_id]))
}

#[pyfunction]
fn valuation_owner_share(world: &PyAny, job_id: &str) -> PyResult<f64> {
    let w = world_of(world)?;
    Ok(owner_share(&w, &w.jobs[job_id]))
}

#[pyfunction]
fn valuation_block_key(world: &PyAny, block_id: &str) -> PyResult<BlockKey> {
    let w = world_of(world)?;
    Ok(block_key(&w.blocks[block_id]))
}

/// `LabValuer(world, lab_id, budget)`'s captured inputs: (round, budget, job ids, block ids, block keys, job keys).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn valuation_valuer_inputs(
    world: &PyAny,
    lab_id: &str,
    budget: Option<f64>,
) -> PyResult<(i64, f64, Vec<String>, Vec<String>, Vec<BlockKey>, Vec<JobKey>)> {
    let w = world_of(world)?;
    let v = LabValuer::new(&w, lab_id, budget, None);
    Ok((v.round_index, v.budget, v.jobs.iter().map(|j| j.job_id.clone()).collect(),
        v.blocks.iter().map(|b| b.block_id.clone()).collect(), v.block_keys, v.job_keys))
}

#[pyfunction]
fn valuation_best_allocation(py: Python, world: &PyAny, lab_id: &str, extra: Vec<String>, without: Vec<String>) -> PyResult<PyObject> {
    let w = world_of(world)?;
    let without: Vec<&str> = without.iter().map(String::as_str).collect();
    plan_py(py, &best_allocation(&w, lab_id, &blocks_of(&w, &extra), &without))
}

/// `LabValuer(world, lab_id, budget).plan(extra, without, money)`.
#[pyfunction]
fn valuation_plan(
    py: Python,
    world: &PyAny,
    lab_id: &str,
    extra: Vec<String>,
    without: Vec<String>,
    money: f64,
    budget: Option<f64>,
) -> PyResult<PyObject> {
    let w = world_of(world)?;
    let without: Vec<&str> = without.iter().map(String::as_str).collect();
    let mut v = LabValuer::new(&w, lab_id, budget, Some(FrontierCache::default()));
    plan_py(py, &v.plan(&blocks_of(&w, &extra), &without, money))
}

/// `LabValuer(world, lab_id, budget).net(extra, without, money)`.
#[pyfunction]
fn valuation_net(
    world: &PyAny,
    lab_id: &str,
    extra: Vec<String>,
    without: Vec<String>,
    money: f64,
    budget: Option<f64>,
) -> PyResult<f64> {
    let w = world_of(world)?;
    let without: Vec<&str> = without.iter().map(String::as_str).collect();
    let mut v = LabValuer::new(&w, lab_id, budget, Some(FrontierCache::default()));
    Ok(v.net(&blocks_of(&w, &extra), &without, money))
}

#[pyfunction]
fn valuation_totals(world: &PyAny, lab_id: &str) -> PyResult<(f64, f64)> {
    let w = world_of(world)?;
    Ok(LabValuer::new(&w, lab_id, None, Some(FrontierCache::default())).totals())
}

#[pyfunction]
fn valuation_job_for(world: &PyAny, lab_id: &str, block_id: &str) -> PyResult<Option<String>> {
    let w = world_of(world)?;
    Ok(LabValuer::new(&w, lab_id, None, Some(FrontierCache::default())).job_for(&w.blocks[block_id]))
}

#[pyfunction]
fn valuation_extra_prices(world: &PyAny, lab_id: &str, block_ids: Vec<String>) -> PyResult<Vec<(f64, Option<String>)>> {
    let w = world_of(world)?;
    let blocks = blocks_of(&w, &block_ids);
    Ok(LabValuer::new(&w, lab_id, None, Some(FrontierCache::default())).extra_prices(&blocks, None))
}

#[pyfunction]
fn valuation_net_without(world: &PyAny, lab_id: &str, i: usize) -> PyResult<f64> {
    let w = world_of(world)?;
    Ok(LabValuer::new(&w, lab_id, None, Some(FrontierCache::default())).net_without(i))
}

#[pyfunction]
fn valuation_member_share_value(world: &PyAny, lab_id: &str) -> PyResult<f64> {
    let w = world_of(world)?;
    Ok(member_share_value(&w, lab_id, None))
}

#[pyfunction]
fn valuation_potential_parts(world: &PyAny, lab_id: &str) -> PyResult<(f64, f64)> {
    let w = world_of(world)?;
    Ok(potential_parts(&w, lab_id, None))
}

#[pyfunction]
fn valuation_potential(world: &PyAny, lab_id: &str) -> PyResult<f64> {
    let w = world_of(world)?;
    let mut v = LabValuer::new(&w, lab_id, None, None);
    Ok(potential(&w, lab_id, Some(&mut v)))
}

/// Everything priced for every lab of one world state, from one valuer per lab, all sharing one
/// cache of `cache_size` frontiers (as an episode's valuers do). Per lab, a dict of `inputs`
/// (what the valuer captured), `totals`, `best`, `potential_parts`, `potential`,
/// `member_share_value`, `net_without` of each own block, and `extra_prices`, `job_for` and
/// `net(extra=[b])` of each of `block_ids`; under `"world"`, `valid_hours` and `owner_share` of
/// every job, `block_key` of every block and `block_fits` of every (block, job) pair.
#[pyfunction]
fn valuation_sweep(py: Python, world: &PyAny, block_ids: Vec<String>, cache_size: usize) -> PyResult<PyObject> {
    let w = world_of(world)?;
    let cache = FrontierCache::new(cache_size);
    let out = PyDict::new(py);
    let extra = blocks_of(&w, &block_ids);
    for lab_id in w.labs.keys() {
        let d = PyDict::new(py);
        let mut v = LabValuer::new(&w, lab_id, None, Some(cache.clone()));
        let inputs = (v.round_index, v.budget, v.jobs.iter().map(|j| j.job_id.clone()).collect::<Vec<_>>(),
                      v.blocks.iter().map(|b| b.block_id.clone()).collect::<Vec<_>>(), v.block_keys.clone(),
                      v.job_keys.clone());
        d.set_item("inputs", inputs)?;
        d.set_item("totals", v.totals())?;
        let (value, energy, assignment) = v.best();
        let a = PyDict::new(py);
        for (k, x) in assignment {
            a.set_item(k, x)?;
        }
        d.set_item("best", (value, energy, a))?;
        d.set_item("potential_parts", potential_parts(&w, lab_id, None))?;
        let mut fresh = LabValuer::new(&w, lab_id, None, Some(cache.clone()));
        d.set_item("potential", potential(&w, lab_id, Some(&mut fresh)))?;
        d.set_item("member_share_value", member_share_value(&w, lab_id, None))?;
        let n = v.blocks.len();
        d.set_item("net_without", (0..n).map(|i| v.net_without(i)).collect::<Vec<_>>())?;
        d.set_item("extra_prices", v.extra_prices(&extra, None))?;
        d.set_item("job_for", extra.iter().map(|b| v.job_for(b)).collect::<Vec<_>>())?;
        d.set_item("net_extra", extra.iter().map(|b| v.net(std::slice::from_ref(b), &[], 0.0)).collect::<Vec<_>>())?;
        out.set_item(lab_id, d)?;
    }
    let g = PyDict::new(py);
    let jobs: Vec<&Job> = w.jobs.values().collect();
    g.set_item("valid_hours", jobs.iter().map(|j| valid_hours(&w, j)).collect::<Vec<_>>())?;
    g.set_item("owner_share", jobs.iter().map(|j| owner_share(&w, j)).collect::<Vec<_>>())?;
    g.set_item("block_key", w.blocks.values().map(block_key).collect::<Vec<_>>())?;
    let fits: Vec<Vec<bool>> = w.blocks.values().map(|b| jobs.iter().map(|j| block_fits(b, j)).collect()).collect();
    g.set_item("block_fits", fits)?;
    out.set_item("world", g)?;
    Ok(out.into())
}

/// Seconds per `LabValuer(world, lab_id, frontiers=cache).totals()` over `n` calls on a world
/// already read, with one cache kept across the calls (`cached`) or none at all.
#[pyfunction]
fn valuation_bench_totals(world: &PyAny, lab_ids: Vec<String>, n: usize, cached: bool) -> PyResult<f64> {
    let w = world_of(world)?;
    let cache = FrontierCache::default();
    let start = std::time::Instant::now();
    let mut sink = 0.0;
    for _ in 0..n {
        for lid in &lab_ids {
            let frontiers = if cached { Some(cache.clone()) } else { Some(FrontierCache::new(0)) };
            sink += LabValuer::new(&w, lid, None, frontiers).totals().0;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if sink.is_nan() {
        return Ok(f64::NAN);
    }
    Ok(secs / (n * lab_ids.len().max(1)) as f64)
}

pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(valuation_block_fits, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_valid_hours, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_owner_share, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_block_key, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_valuer_inputs, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_best_allocation, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_plan, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_net, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_totals, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_job_for, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_extra_prices, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_net_without, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_member_share_value, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_potential_parts, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_potential, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(valuation_bench_totals, m)?)?;
    Ok(())
}
