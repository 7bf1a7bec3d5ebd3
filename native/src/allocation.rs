//! The allocation dynamic program on packed keys, mirroring `gpu_arena.core.allocation`: a solved
//! [`Frontier`] per (blocks, jobs) pair, its plans by budget and its prices of extra blocks.
//!
//! The inner loops are `crate::kernels` (`core/kernels.py`); this module keeps what Python keeps
//! around them: the memo tables, the budget that binds no state (`budget_for`), the grouped shortcut
//! and its fallback to the scan. Python prices large batches with numpy where its kernels are not
//! compiled; that path is built to give exactly the scan's results, so the port always scans (as
//! the compiled Python does).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;

use crate::kernels;
pub use crate::kernels::{job_value, BlockKey, GroupRow, IntHasher, JobKey, KernelError, NoJob, ParentMap, Radix, INF};

/// `Frontier.solve`'s result: (value, energy, job index per block or -1).
pub type Plan = (f64, f64, Vec<i64>);

/// `_Groups`: ("no job" top, its first state, runner-up), per job its group rows, the largest magnitude.
pub type Groups = (NoJob, Vec<Vec<GroupRow>>, f64);

/// A block key with its floats as bits, so it can key a hash map (Python keys dicts by `==`;
/// the only floats equal by `==` with other bits are ±0.0, which give the same prices).
type KeyBits = (i64, i64, u64, u64);

fn key_bits(k: &BlockKey) -> KeyBits {
    (k.0, k.1, k.2.to_bits(), k.3.to_bits())
}

fn job_bits(k: &JobKey) -> (i64, i64, i64, u64, u64, u64) {
    (k.0, k.1, k.2, k.3.to_bits(), k.4.to_bits(), k.5.to_bits())
}

/// `Frontier`: the solved DP of one (blocks, jobs) pair, with everything priced off it memoised.
///
/// `base` holds each state's value as `kernels.state_values` sums it; where there are no jobs
/// Python holds the int 0 there, whose arithmetic with floats is that of 0.0 (only the type of
/// `solve`'s value differs: see [`Frontier::solve`]).
pub struct Frontier {
    pub jobs: Vec<JobKey>,
    pub radix: Vec<Radix>,
    pub codes: Vec<i64>,
    pub neg_e: Vec<f64>,
    pub parents: Vec<ParentMap>,
    pub base: Vec<f64>,
    pub max_energy: f64,
    /// plans by budget (its bits)
    solved: HashMap<u64, Plan>,
    /// one-more-block prices by (block, budget)
    extras: HashMap<(KeyBits, u64), (f64, i64)>,
    columns: Option<Vec<Vec<i64>>>,
    /// each state's hours per job, flat and row-major (`jobs.len()` per state)
    states: Option<Vec<i64>>,
    /// each state's value per job, laid out as `states`
    vals: Option<Vec<f64>>,
    groups: Option<Groups>,
}

impl Frontier {
    /// `Frontier.__init__`: solve the DP of `blocks` for `jobs`. Panics where a packed state
    /// leaves `i64` (Python's ints go on): see [`Frontier::try_new`].
    pub fn new(blocks: &[BlockKey], jobs: &[JobKey]) -> Self {
        Self::try_new(blocks, jobs).expect("the packed states of a lab's jobs fit in 64 bits")
    }

    /// `Frontier.__init__`, or the kernels' error where a packed state leaves `i64`.
    pub fn try_new(blocks: &[BlockKey], jobs: &[JobKey]) -> Result<Self, KernelError> {
        let s = kernels::solve_frontier(blocks, jobs)?;
        let base = if jobs.is_empty() { vec![0.0; s.codes.len()] } else { s.values };
        // -min(neg_e): Python's min keeps the first of equal values
        let mut least = s.neg_e[0];
        for &x in &s.neg_e[1..] {
            if x < least {
                least = x;
            }
        }
        Ok(Frontier {
            jobs: jobs.to_vec(),
            radix: s.radix,
            codes: s.codes,
            neg_e: s.neg_e,
            parents: s.parents,
            base,
            max_energy: -least,
            solved: HashMap::new(),
            extras: HashMap::new(),
            columns: None,
            states: None,
            vals: None,
            groups: None,
        })
    }

    /// `Frontier.columns`: each job's hours in every state, in frontier order.
    pub fn columns(&mut self) -> &[Vec<i64>] {
        if self.columns.is_none() {
            let cols = self
                .radix
                .iter()
                .map(|&(mult, r)| self.codes.iter().map(|&code| code.div_euclid(mult).rem_euclid(r)).collect())
                .collect();
            self.columns = Some(cols);
        }
        self.columns.as_deref().unwrap_or(&[])
    }

    /// `Frontier.states`: each state's hours per job, in frontier order, flat and row-major
    /// (`jobs.len()` per state).
    pub fn states(&mut self) -> &[i64] {
        if self.states.is_none() {
            let n = self.codes.len();
            self.columns();
            let cols = self.columns.as_deref().unwrap_or(&[]);
            let states = (0..n).flat_map(|i| cols.iter().map(move |c| c[i])).collect();
            self.states = Some(states);
        }
        self.states.as_deref().unwrap_or(&[])
    }

    /// `Frontier.vals`: each state's value per job, laid out as [`Frontier::states`] (a job's
    /// value depends on its own hours only).
    pub fn vals(&mut self) -> &[f64] {
        if self.vals.is_none() {
            let n = self.codes.len();
            self.columns();
            let cols = self.columns.as_deref().unwrap_or(&[]);
            let value_cols: Vec<Vec<f64>> = self
                .jobs
                .iter()
                .zip(cols)
                .map(|(j, col)| col.iter().map(|&h| job_value(j.4, j.0, j.5, h)).collect())
                .collect();
            let vals = (0..n).flat_map(|i| value_cols.iter().map(move |c| c[i])).collect();
            self.vals = Some(vals);
        }
        self.vals.as_deref().unwrap_or(&[])
    }

    /// `Frontier.budget_for`: `budget`, or ∞ where it binds no state even with `energy` more to pay.
    pub fn budget_for(&self, budget: f64, energy: f64) -> f64 {
        if budget + 1e-9 >= self.max_energy + energy {
            INF
        } else {
            budget
        }
    }

    /// `Frontier.solve`: the best assignment whose energy fits `budget`. Where there are no jobs
    /// Python's value is the int 0 (the sum of nothing); here it is 0.0.
    pub fn solve(&mut self, budget: f64) -> Plan {
        let budget = self.budget_for(budget, 0.0);
        if let Some(hit) = self.solved.get(&budget.to_bits()) {
            return hit.clone();
        }
        let (best_i, choices) =
            kernels::best_plan(&self.codes, &self.neg_e, &self.base, &self.parents, self.jobs.len() as i64, budget)
                .expect("the parent maps hold packed states of this frontier");
        assert!(best_i >= 0, "assigning nothing costs nothing and is always in the frontier");
        let best_value = self.base[best_i as usize];
        let best_total = best_value + self.neg_e[best_i as usize];
        let out = (best_value, best_value - best_total, choices);
        self.solved.insert(budget.to_bits(), out.clone());
        out
    }

    /// `Frontier.groups`: the frontier summarised for pricing extra blocks under a budget that
    /// binds no state.
    pub fn groups(&mut self) -> &Groups {
        if self.groups.is_none() {
            self.columns();
            let cols = self.columns.as_deref().unwrap_or(&[]);
            let (nojob, per_job) = kernels::frontier_groups(&self.jobs, cols, &self.base, &self.neg_e);
            // Python's max over the magnitudes: the first of the largest
            let mut scale = f64::NEG_INFINITY;
            let mut first = true;
            for x in self.base.iter().chain(self.neg_e.iter()).map(|x| x.abs()).chain(self.jobs.iter().map(|j| j.4.abs())) {
                if first || x > scale {
                    scale = x;
                    first = false;
                }
            }
            self.groups = Some((nojob, per_job, scale));
        }
        self.groups.as_ref().expect("just built")
    }
}

/// `_CLEAR`: how far below the best every other candidate must lie for the grouped answer to be the scan's.
const CLEAR: f64 = 1e-9;

/// `_grouped`: the scan's answer under a budget that binds no state, from the frontier's groups,
/// or None where it cannot be sure or the budget binds.
fn grouped(fr: &mut Frontier, extra: &BlockKey, budget: f64) -> Option<(f64, i64)> {
    if budget != INF {
        return None;
    }
    fr.groups();
    let (nojob, per_job, scale) = fr.groups.as_ref().expect("built above");
    if *scale > 1e5 || extra.3.abs() > 1e5 {
        return None;
    }
    kernels::grouped_extra(&fr.jobs, *nojob, per_job, *extra, CLEAR)
}

/// `_scan_extra`: the scalar what-if, one pass over the frontier for one more block.
fn scan_extra(fr: &mut Frontier, extra: &BlockKey, budget: f64) -> (f64, i64) {
    fr.states();
    fr.vals();
    let states = fr.states.as_deref().unwrap_or(&[]);
    let vals = fr.vals.as_deref().unwrap_or(&[]);
    kernels::scan_extra(&fr.jobs, states, &fr.neg_e, vals, &fr.base, *extra, budget)
}

/// A frontier shared by the caches and the valuers that fetched it (its memo tables fill as
/// they ask; a lock, not a `RefCell`, so an episode holding them may cross threads).
pub type SharedFrontier = Arc<Mutex<Frontier>>;

/// The frontier behind `fr`, locked (a panic elsewhere leaves memo tables that are still valid).
pub fn lock(fr: &SharedFrontier) -> MutexGuard<'_, Frontier> {
    fr.lock().unwrap_or_else(|e| e.into_inner())
}

type CacheKey = (Vec<(i64, i64, u64, u64)>, Vec<(i64, i64, i64, u64, u64, u64)>);

struct CacheInner {
    maxsize: usize,
    clock: u64,
    map: HashMap<CacheKey, (SharedFrontier, u64), BuildHasherDefault<IntHasher>>,
    /// an episode's cache: a miss asks the shared one (false: the shared one, which solves it)
    shared: bool,
}

/// `_EPISODE_CACHE`: an episode's cache size.
pub const EPISODE_CACHE: usize = 256;
/// `_FRONTIER_CACHE`: the shared cache's size.
pub const FRONTIER_CACHE: usize = 128;

/// `FrontierCache`: the frontiers one episode has solved, by (blocks, jobs), the least recently
/// used dropped past `maxsize`. A handle: clones share the same cache (as Python's valuers share
/// their episode's). As in Python, an episode's cache asks the shared one on a miss, so episodes
/// played one after another in a process reuse what the others solved.
#[derive(Clone)]
pub struct FrontierCache(Arc<Mutex<CacheInner>>);

impl Default for FrontierCache {
    fn default() -> Self {
        FrontierCache::new(EPISODE_CACHE)
    }
}

impl FrontierCache {
    /// `FrontierCache(maxsize)`.
    pub fn new(maxsize: usize) -> Self {
        FrontierCache(Arc::new(Mutex::new(CacheInner { maxsize, clock: 0, map: HashMap::default(), shared: true })))
    }

    /// The shared cache itself: a miss there is solved.
    fn shared(maxsize: usize) -> Self {
        FrontierCache(Arc::new(Mutex::new(CacheInner { maxsize, clock: 0, map: HashMap::default(), shared: false })))
    }

    /// `FrontierCache.get`: the solved frontier of `blocks` for `jobs`, solving it on a miss.
    pub fn get(&self, blocks: &[BlockKey], jobs: &[JobKey]) -> SharedFrontier {
        let key: CacheKey = (blocks.iter().map(key_bits).collect(), jobs.iter().map(job_bits).collect());
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        if let Some(hit) = inner.map.get_mut(&key) {
            hit.1 = now;
            return hit.0.clone();
        }
        // solved outside the lock would let two askers solve the same pair; the cache is per
        // episode, so that never happens in practice and the simple order is kept
        let fr: SharedFrontier = if inner.shared {
            SHARED.with(|c| c.get(blocks, jobs))
        } else {
            Arc::new(Mutex::new(Frontier::new(blocks, jobs)))
        };
        if inner.maxsize == 0 {
            return fr;
        }
        if inner.map.len() >= inner.maxsize {
            let oldest = inner.map.iter().min_by_key(|(_, v)| v.1).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                inner.map.remove(&k);
            }
        }
        inner.map.insert(key, (fr.clone(), now));
        fr
    }

    /// How many frontiers it holds.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).map.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

thread_local! {
    /// `_frontier`'s lru_cache: the cache of callers that keep none.
    static SHARED: FrontierCache = FrontierCache::shared(FRONTIER_CACHE);
}

/// `frontier`: the solved DP of `blocks` for `jobs`, cached by value in `cache` if given, else
/// in the shared cache.
pub fn frontier(blocks: &[BlockKey], jobs: &[JobKey], cache: Option<&FrontierCache>) -> SharedFrontier {
    match cache {
        Some(c) => c.get(blocks, jobs),
        None => SHARED.with(|c| c.get(blocks, jobs)),
    }
}

/// `solve`: the exact best assignment whose energy fits `budget` (∞: [`INF`]).
pub fn solve(blocks: &[BlockKey], jobs: &[JobKey], budget: f64) -> Plan {
    lock(&frontier(blocks, jobs, None)).solve(budget)
}

/// `with_extra`: the best value − energy with one more block, and the job it serves (-1: none).
pub fn with_extra(blocks: &[BlockKey], jobs: &[JobKey], extra: &BlockKey, budget: f64) -> (f64, i64) {
    extra_price(&mut lock(&frontier(blocks, jobs, None)), extra, budget)
}

/// `extra_price`: [`with_extra`] on a frontier already at hand.
pub fn extra_price(fr: &mut Frontier, extra: &BlockKey, budget: f64) -> (f64, i64) {
    let b = fr.budget_for(budget, extra.3);
    let key = (key_bits(extra), b.to_bits());
    if let Some(&hit) = fr.extras.get(&key) {
        return hit;
    }
    let hit = match grouped(fr, extra, b) {
        Some(h) => h,
        None => scan_extra(fr, extra, b),
    };
    fr.extras.insert(key, hit);
    hit
}

/// `with_extras`: [`with_extra`] for many extra blocks at once, with exactly its results.
pub fn with_extras(blocks: &[BlockKey], jobs: &[JobKey], extras: &[BlockKey], budget: f64) -> Vec<(f64, i64)> {
    extra_prices(&mut lock(&frontier(blocks, jobs, None)), extras, budget)
}

/// `extra_prices`: [`with_extras`] on a frontier already at hand. Each block is priced as
/// [`extra_price`] prices it (grouped where sure, else scanned), so the batch gives its results.
pub fn extra_prices(fr: &mut Frontier, extras: &[BlockKey], budget: f64) -> Vec<(f64, i64)> {
    extras.iter().map(|e| extra_price(fr, e, budget)).collect()
}

// ---------------------------------------------------------------------------- test functions

fn py_plan(py: Python, jobs: &[JobKey], p: Plan) -> PyObject {
    let choices = pyo3::types::PyTuple::new(py, p.2);
    if jobs.is_empty() {
        // Python's sum of no job values is the int 0
        (0i64, p.1, choices).into_py(py)
    } else {
        (p.0, p.1, choices).into_py(py)
    }
}

/// `solve` on a fresh frontier, then again from its memo (both must agree).
#[pyfunction]
fn allocation_solve(py: Python, blocks: Vec<BlockKey>, jobs: Vec<JobKey>, budgets: Vec<f64>) -> Vec<PyObject> {
    let mut fr = Frontier::new(&blocks, &jobs);
    budgets.iter().map(|&b| py_plan(py, &jobs, fr.solve(b))).collect()
}

/// `with_extra` for each of `extras` on one fresh frontier, in turn (memo hits included).
#[pyfunction]
fn allocation_with_extra(blocks: Vec<BlockKey>, jobs: Vec<JobKey>, extras: Vec<BlockKey>, budget: f64) -> Vec<(f64, i64)> {
    let mut fr = Frontier::new(&blocks, &jobs);
    extras.iter().map(|e| extra_price(&mut fr, e, budget)).collect()
}

/// `with_extras` on a fresh frontier.
#[pyfunction]
fn allocation_with_extras(blocks: Vec<BlockKey>, jobs: Vec<JobKey>, extras: Vec<BlockKey>, budget: f64) -> Vec<(f64, i64)> {
    extra_prices(&mut Frontier::new(&blocks, &jobs), &extras, budget)
}

type FrontierFacts = (f64, Vec<f64>, Vec<Option<(f64, i64)>>);

/// The frontier's `max_energy`, `budget_for(budget, energy)` and the grouped answer (None:
/// unsure) for each extra block under ∞.
#[pyfunction]
fn allocation_frontier_facts(
    blocks: Vec<BlockKey>,
    jobs: Vec<JobKey>,
    extras: Vec<BlockKey>,
    budget: f64,
) -> FrontierFacts {
    let mut fr = Frontier::new(&blocks, &jobs);
    let budgets = extras.iter().map(|e| fr.budget_for(budget, e.3)).collect();
    let grouped = extras.iter().map(|e| grouped(&mut fr, e, INF)).collect();
    (fr.max_energy, budgets, grouped)
}

pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(allocation_solve, m)?)?;
    m.add_function(wrap_pyfunction!(allocation_with_extra, m)?)?;
    m.add_function(wrap_pyfunction!(allocation_with_extras, m)?)?;
    m.add_function(wrap_pyfunction!(allocation_frontier_facts, m)?)?;
    Ok(())
}
