//! The allocation DP's inner loops: a port of `gpu_arena.core.kernels`, function by function.
//!
//! Every function here does the same IEEE operations in the same order as its Python original,
//! so it returns the same floats bit for bit (Rust never fuses or reorders float operations). The
//! Python ints become `i64`: each result equals Python's wherever Python's ints stay within `i64`;
//! where one would leave it (a packed state past 2^63), the function returns
//! [`KernelError::Overflow`] instead of a wrong number, and a division by zero (a zero radix or
//! job count) returns [`KernelError::ZeroDivision`] where Python raises `ZeroDivisionError`.
//! Integer `//` and `%` follow Python's floor semantics for every sign ([`floordiv`], [`pymod`]).
//!
//! The pure functions take slices of plain tuples ([`BlockKey`], [`JobKey`], [`GroupRow`]) so a
//! Rust port of `gpu_arena.core.allocation` calls them without conversions; a frontier's states and
//! per-job values enter [`scan_extra`] as flat row-major slices. Dicts whose order Python exposes
//! (the frontier, the parent maps) are insertion-ordered maps ([`StateMap`], [`ParentMap`]) that
//! keep a key's first place when its value is replaced, as a Python dict does.
//!
//! The `kernels_<name>` functions wrap each kernel for Python, taking the Python function's
//! arguments and returning its structures (tuples, lists, dicts, `None`) exactly.

use std::hash::{BuildHasherDefault, Hasher};

use indexmap::map::Entry;
use indexmap::IndexMap;
use pyo3::exceptions::{PyIndexError, PyOverflowError, PyZeroDivisionError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyList, PyTuple};
use pyo3::wrap_pyfunction;

/// `kernels.BlockKey`: (hours, end_round, reliability, energy_total).
pub type BlockKey = (i64, i64, f64, f64);
/// `kernels.JobKey`: (required, fixed_hours, deadline, min_reliability, value (share-weighted),
/// partial_credit).
pub type JobKey = (i64, i64, i64, f64, f64, f64);
/// `kernels.GroupRow`: per job, one row per hours h of its groups: (h, the top's first state, the
/// runner-up's value, the job's value at h, base of that state, neg_e of that state).
pub type GroupRow = (i64, i64, f64, f64, f64, f64);
/// One entry of `kernels.radix`'s result: (multiplier, radix) of a job's digit in a packed state.
pub type Radix = (i64, i64);
/// The "no job" group of `kernels.frontier_groups`: (top, its first state, runner-up).
pub type NoJob = (f64, i64, f64);
/// `kernels.INF`.
pub const INF: f64 = f64::INFINITY;

/// The hasher of the kernels' maps: packed states are ints, often multiples of a power of two
/// (a radix of 2, 4, 8 or 16), so the key is spread by a folded 128-bit multiply.
#[derive(Default, Clone, Copy)]
pub struct IntHasher {
    hash: u64,
}

impl IntHasher {
    #[inline]
    fn mix(&mut self, x: u64) {
        let m = u128::from(self.hash ^ x) * 0x9E37_79B9_7F4A_7C15_u128;
        self.hash = (m as u64) ^ ((m >> 64) as u64);
    }
}

impl Hasher for IntHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.mix(x);
    }

    #[inline]
    fn write_i64(&mut self, x: i64) {
        self.mix(x as u64);
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.mix(x as u64);
    }
}

/// An insertion-ordered map with [`IntHasher`]: iterates as a Python dict with the same inserts
/// would (replacing a value keeps the key's place).
pub type Map<K, V> = IndexMap<K, V, BuildHasherDefault<IntHasher>>;
/// `dp`'s frontier: packed state -> minus the least energy that reaches it, in DP order.
pub type StateMap = Map<i64, f64>;
/// One block's parent map in `dp`: packed state -> packed previous state × (number of jobs) + job.
pub type ParentMap = Map<i64, i64>;

/// Why a kernel gave no result where Python would raise (or leave `i64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelError {
    /// Python raises `ZeroDivisionError` (an integer `//` or `%` by zero).
    ZeroDivision,
    /// An int Python computes lies outside `i64`.
    Overflow,
}

impl From<KernelError> for PyErr {
    fn from(err: KernelError) -> PyErr {
        match err {
            KernelError::ZeroDivision => PyZeroDivisionError::new_err("integer division or modulo by zero"),
            KernelError::Overflow => PyOverflowError::new_err("an int of the kernel does not fit in 64 bits"),
        }
    }
}

type KResult<T> = Result<T, KernelError>;

#[inline]
fn add(a: i64, b: i64) -> KResult<i64> {
    a.checked_add(b).ok_or(KernelError::Overflow)
}

#[inline]
fn mul(a: i64, b: i64) -> KResult<i64> {
    a.checked_mul(b).ok_or(KernelError::Overflow)
}

/// Python's `a // b` on ints (floor division, any signs).
#[inline]
pub fn floordiv(a: i64, b: i64) -> KResult<i64> {
    if b == 0 {
        return Err(KernelError::ZeroDivision);
    }
    let q = a.checked_div(b).ok_or(KernelError::Overflow)?; // i64::MIN // -1 is 2**63
    if a % b != 0 && ((a < 0) != (b < 0)) {
        Ok(q - 1)
    } else {
        Ok(q)
    }
}

/// Python's `a % b` on ints (the remainder takes the divisor's sign).
#[inline]
pub fn pymod(a: i64, b: i64) -> KResult<i64> {
    if b == 0 {
        return Err(KernelError::ZeroDivision);
    }
    let r = a.wrapping_rem(b); // i64::MIN % -1 is 0, as in Python
    if r != 0 && ((r < 0) != (b < 0)) {
        Ok(r + b)
    } else {
        Ok(r)
    }
}

/// `float >= int` compared exactly, as Python compares a float with an int.
fn float_ge_int(x: f64, n: i64) -> bool {
    if x.is_nan() {
        false
    } else if x >= 9_223_372_036_854_775_808.0 {
        true // at least 2**63: above every i64
    } else if x < -9_223_372_036_854_775_808.0 {
        false
    } else {
        x.floor() as i64 >= n // exact: the floor lies in [-2**63, 2**63)
    }
}

/// `kernels.job_value`: value of a job given the valid hours assigned to it (whole hours).
#[inline]
pub fn job_value(value: f64, required: i64, partial_credit: f64, hours: i64) -> f64 {
    if hours >= required {
        return value;
    }
    if partial_credit <= 0.0 || hours <= 0 {
        return 0.0;
    }
    // Python converts each int to the nearest float (ties to even) as `as` does
    value * partial_credit * hours as f64 / required as f64
}

/// `kernels.job_value` for a float `hours` (the Python function accepts either).
pub fn job_value_f64(value: f64, required: i64, partial_credit: f64, hours: f64) -> f64 {
    if float_ge_int(hours, required) {
        return value;
    }
    if partial_credit <= 0.0 || hours <= 0.0 {
        return 0.0;
    }
    value * partial_credit * hours / required as f64
}

/// `kernels.radix`: (multiplier, radix) of each job's digit in a packed state: job k's capped
/// hours times the product of (requirement + 1) of the jobs before it.
pub fn radix(jobs: &[JobKey]) -> KResult<Vec<Radix>> {
    let mut out = Vec::with_capacity(jobs.len());
    // None: the product overflowed (Python's int goes on; only a later job would read it)
    let mut mult: Option<i64> = Some(1);
    for job in jobs {
        let r = add(job.0.max(0), 1)?;
        let m = mult.ok_or(KernelError::Overflow)?;
        out.push((m, r));
        mult = m.checked_mul(r);
    }
    Ok(out)
}

/// `kernels.solve_frontier`'s result: a frontier's radix, its packed states (`codes`) and minus
/// their least energies (`neg_e`) in DP order, the parent maps of [`dp`], and each state's value
/// ([`state_values`]; empty where there are no jobs).
#[derive(Debug, Clone)]
pub struct Solved {
    pub radix: Vec<Radix>,
    pub codes: Vec<i64>,
    pub neg_e: Vec<f64>,
    pub parents: Vec<ParentMap>,
    pub values: Vec<f64>,
}

/// `kernels.solve_frontier`: everything a frontier is built from (see [`Solved`]).
pub fn solve_frontier(blocks: &[BlockKey], jobs: &[JobKey]) -> KResult<Solved> {
    let rad = radix(jobs)?;
    let (frontier, parents) = dp(blocks, jobs, &rad)?;
    let codes: Vec<i64> = frontier.keys().copied().collect();
    let neg_e: Vec<f64> = frontier.values().copied().collect();
    let values = if jobs.is_empty() { Vec::new() } else { state_values(&codes, jobs, &rad)? };
    Ok(Solved { radix: rad, codes, neg_e, parents, values })
}

/// `kernels.best_plan`: the state of the best plan whose energy fits `budget` (the first of the
/// largest value − energy, later ones must beat it by more than 1e-12) and the job each block
/// serves in it (-1: none), walked back through the parent maps. `-1` and all `-1` where no state
/// fits.
pub fn best_plan(codes: &[i64], neg_es: &[f64], bases: &[f64], parents: &[ParentMap], n_jobs: i64,
                 budget: f64) -> KResult<(i64, Vec<i64>)> {
    best_plan_with(codes, neg_es, bases, parents.len(), n_jobs, budget, |b, state| {
        Ok::<_, KernelError>(parents[b].get(&state).copied())
    })
}

/// [`best_plan`] reading block `b`'s parent of a state through `parent(b, state)` (so the Python
/// wrapper looks into the Python dicts without converting them).
pub fn best_plan_with<E, F>(codes: &[i64], neg_es: &[f64], bases: &[f64], n_parents: usize, n_jobs: i64,
                            budget: f64, mut parent: F) -> Result<(i64, Vec<i64>), E>
where
    E: From<KernelError>,
    F: FnMut(usize, i64) -> Result<Option<i64>, E>,
{
    let limit = budget + 1e-9;
    let mut best_i: i64 = -1;
    let mut best_total = -INF;
    for i in 0..codes.len() {
        let neg_e = neg_es[i];
        if -neg_e > limit {
            continue;
        }
        let total = bases[i] + neg_e;
        if total > best_total + 1e-12 {
            best_i = i as i64;
            best_total = total;
        }
    }
    let mut choices = vec![-1_i64; n_parents];
    if best_i < 0 {
        return Ok((best_i, choices));
    }
    let mut state = codes[best_i as usize];
    for b in (0..n_parents).rev() {
        if let Some(step) = parent(b, state)? {
            // else the state came through block b unchanged: it serves no job
            state = floordiv(step, n_jobs)?;
            choices[b] = pymod(step, n_jobs)?;
        }
    }
    Ok((best_i, choices))
}

/// `kernels.dp`: the allocation DP over `blocks`: packed state -> minus the least energy that
/// reaches it, and per block the parent map of the states it reached or improved (packed
/// previous state × number of jobs + job). `radix` must cover every job (`radix[k]` for each k).
pub fn dp(blocks: &[BlockKey], jobs: &[JobKey], radix: &[Radix]) -> KResult<(StateMap, Vec<ParentMap>)> {
    struct Usable {
        k: i64,
        mult: i64,
        r: i64,
        req: i64,
        deadline: i64,
        rel: f64,
    }
    #[derive(Clone, Copy)]
    struct Opt {
        k: i64,
        mult: i64,
        r: i64,
        cap: i64,
    }
    let n_jobs = jobs.len() as i64;
    let mut start: i64 = 0;
    for (k, job) in jobs.iter().enumerate() {
        start = add(start, mul(job.1.min(job.0), radix[k].0)?)?;
    }
    let mut frontier = StateMap::default();
    frontier.insert(start, 0.0);
    let mut parents: Vec<ParentMap> = Vec::with_capacity(blocks.len());
    // the jobs a block could serve at all (positive value and requirement)
    let usable: Vec<Usable> = jobs
        .iter()
        .enumerate()
        .filter(|(_, job)| job.4 > 0.0 && job.0 > 0)
        .map(|(k, job)| Usable { k: k as i64, mult: radix[k].0, r: radix[k].1, req: job.0, deadline: job.2, rel: job.3 })
        .collect();
    let mut options: Vec<Opt> = Vec::with_capacity(usable.len());
    // the frontier as it was before the block (Python iterates the old dict while filling a copy;
    // here the map is updated in place, which keeps the copy's order: old keys first, new ones after)
    let mut before: Vec<(i64, f64)> = Vec::new();
    for &(hours, end, rel, energy) in blocks {
        options.clear();
        options.extend(
            usable
                .iter()
                .filter(|u| end <= u.deadline && rel >= u.rel)
                .map(|u| Opt { k: u.k, mult: u.mult, r: u.r, cap: u.req }),
        );
        let mut par = ParentMap::default();
        if options.is_empty() {
            parents.push(par); // the block serves no job: every state passes through unchanged
            continue;
        }
        before.clear();
        before.extend(frontier.iter().map(|(&s, &e)| (s, e)));
        for &(state, neg_e) in &before {
            let ne = neg_e - energy;
            for o in &options {
                let h = pymod(floordiv(state, o.mult)?, o.r)?;
                if h >= o.cap {
                    continue;
                }
                // capped: hours past the need never count (an overflowing h + hours is past any cap)
                let capped = match h.checked_add(hours) {
                    Some(nh) => {
                        if nh > o.cap {
                            o.cap
                        } else {
                            nh
                        }
                    }
                    None if hours > 0 => o.cap,
                    None => return Err(KernelError::Overflow),
                };
                let delta = capped.checked_sub(h).ok_or(KernelError::Overflow)?;
                let ns = add(state, mul(delta, o.mult)?)?;
                match frontier.entry(ns) {
                    Entry::Occupied(mut slot) => {
                        if ne > *slot.get() + 1e-12 {
                            *slot.get_mut() = ne;
                        } else {
                            continue;
                        }
                    }
                    Entry::Vacant(slot) => {
                        slot.insert(ne);
                    }
                }
                par.insert(ns, add(mul(state, n_jobs)?, o.k)?);
            }
        }
        parents.push(par);
    }
    Ok((frontier, parents))
}

/// `kernels.scan_extra`: the best value − energy with one more block, scanning every state of a
/// frontier, and the job it serves (-1: none): a candidate is kept only if it beats the best so
/// far by more than 1e-12. `states` and `vals` are the frontier's hours and values per job, flat
/// and row-major (`jobs.len()` per state); the states are those of `neg_es` (and `bases`).
pub fn scan_extra(jobs: &[JobKey], states: &[i64], neg_es: &[f64], vals: &[f64], bases: &[f64], extra: BlockKey,
                  budget: f64) -> (f64, i64) {
    let (hours, end, rel, energy) = extra;
    let n_jobs = jobs.len();
    let fits: Vec<usize> = (0..n_jobs)
        .filter(|&k| {
            let job = &jobs[k];
            end <= job.2 && rel >= job.3 && job.4 > 0.0 && job.0 > 0
        })
        .collect();
    let limit = budget + 1e-9;
    let mut best = -INF;
    let mut choice: i64 = -1;
    for (i, &neg_e) in neg_es.iter().enumerate() {
        if -neg_e > limit {
            continue;
        }
        let base = bases[i];
        if base + neg_e > best + 1e-12 {
            best = base + neg_e;
            choice = -1;
        }
        if -neg_e + energy > limit {
            continue;
        }
        let row = i * n_jobs;
        for &k in &fits {
            let job = &jobs[k];
            let req = job.0;
            let have = states[row + k];
            if have >= req {
                continue;
            }
            // saturating: an h + hours past i64 is past req, where both forms give req
            let nh = have.saturating_add(hours);
            let gain = job_value(job.4, req, job.5, if nh < req { nh } else { req }) - vals[row + k];
            let cand = base + gain + neg_e - energy;
            if cand > best + 1e-12 {
                best = cand;
                choice = k as i64;
            }
        }
    }
    (best, choice)
}

/// `kernels.grouped_extra`: [`scan_extra`]'s answer under a budget that binds no state, from a
/// frontier's groups ([`frontier_groups`]), or None where another candidate lies within `clear`
/// of the best. `per_job[k]` is read for each job `k` the extra block fits.
pub fn grouped_extra(jobs: &[JobKey], nojob: NoJob, per_job: &[Vec<GroupRow>], extra: BlockKey,
                     clear: f64) -> Option<(f64, i64)> {
    let (hours, end, rel, energy) = extra;
    let mut best = nojob.0;
    let mut first_state = nojob.1; // the best's first candidate: (state, place in the state)
    let mut first_place: i64 = 0;
    let mut runner = nojob.2;
    for (k, job) in jobs.iter().enumerate() {
        let req = job.0;
        let value = job.4;
        let pc = job.5;
        if !(end <= job.2 && rel >= job.3 && value > 0.0 && req > 0) {
            continue;
        }
        let place = 1 + k as i64;
        for row in &per_job[k] {
            let nh = row.0.saturating_add(hours);
            let gain = job_value(value, req, pc, if nh < req { nh } else { req }) - row.3;
            let cand = row.4 + gain + row.5 - energy;
            let hidden = row.2 + gain - energy;
            if hidden > runner {
                runner = hidden;
            }
            if cand > best {
                if best > runner {
                    runner = best;
                }
                best = cand;
                first_state = row.1;
                first_place = place;
            } else if cand == best {
                // an exact tie: the scan keeps the earlier (state, then "no job" before each job in order)
                if row.1 < first_state || (row.1 == first_state && place < first_place) {
                    first_state = row.1;
                    first_place = place;
                }
            } else if cand > runner {
                runner = cand;
            }
        }
    }
    if runner >= best - clear {
        return None;
    }
    Some((best, first_place - 1))
}

/// `kernels.state_values`: each packed state's value, the sum of its jobs' values added job by
/// job in job order from zero (as `sum`).
pub fn state_values(codes: &[i64], jobs: &[JobKey], radix: &[Radix]) -> KResult<Vec<f64>> {
    let mut out = Vec::with_capacity(codes.len());
    for &code in codes {
        let mut total = 0.0_f64;
        for (k, job) in jobs.iter().enumerate() {
            let (mult, r) = radix[k];
            total += job_value(job.4, job.0, job.5, pymod(floordiv(code, mult)?, r)?);
        }
        out.push(total);
    }
    Ok(out)
}

/// Where each hours value's group sits in `frontier_groups`' lists (Python's `slot` dict): a
/// table for hours in [0, req) where req is small, a map for any other hours.
struct Slots {
    dense: Vec<u32>,
    sparse: Map<i64, usize>,
}

const NO_SLOT: u32 = u32::MAX;

impl Slots {
    fn new(req: i64) -> Slots {
        let dense = if (1..=4096).contains(&req) { vec![NO_SLOT; req as usize] } else { Vec::new() };
        Slots { dense, sparse: Map::default() }
    }

    /// The group of `h`, or None after giving `h` the place `next`.
    #[inline]
    fn get_or_insert(&mut self, h: i64, next: usize) -> Option<usize> {
        if h >= 0 && (h as u64) < self.dense.len() as u64 {
            let cell = &mut self.dense[h as usize];
            if *cell == NO_SLOT {
                *cell = next as u32;
                None
            } else {
                Some(*cell as usize)
            }
        } else {
            match self.sparse.entry(h) {
                Entry::Occupied(slot) => Some(*slot.get()),
                Entry::Vacant(slot) => {
                    slot.insert(next);
                    None
                }
            }
        }
    }
}

/// `kernels.frontier_groups`: a frontier's groups for pricing extra blocks: the "no job" top, its
/// first state and the runner-up; per job, one row per hours below the requirement, in order of
/// first appearance. `columns[k][i]` is state i's hours for job k; the states are those of `bases`.
pub fn frontier_groups(jobs: &[JobKey], columns: &[Vec<i64>], bases: &[f64], neg_es: &[f64])
                       -> (NoJob, Vec<Vec<GroupRow>>) {
    let n = bases.len();
    let values: Vec<f64> = (0..n).map(|i| bases[i] + neg_es[i]).collect();
    let mut top = -INF;
    let mut first: i64 = -1;
    let mut second = -INF;
    for (i, &v) in values.iter().enumerate() {
        if v > top {
            second = top;
            top = v;
            first = i as i64;
        } else if v > second {
            second = v;
        }
    }
    let mut per_job: Vec<Vec<GroupRow>> = Vec::with_capacity(jobs.len());
    for (k, job) in jobs.iter().enumerate() {
        let req = job.0;
        let column = &columns[k];
        let mut slots = Slots::new(req);
        let mut hs: Vec<i64> = Vec::new();
        let mut tops: Vec<f64> = Vec::new();
        let mut firsts: Vec<usize> = Vec::new();
        let mut seconds: Vec<f64> = Vec::new();
        for i in 0..n {
            let h = column[i];
            if h >= req {
                continue; // the scan never offers job k an extra block in a state that fills it
            }
            let v = values[i];
            match slots.get_or_insert(h, hs.len()) {
                None => {
                    hs.push(h);
                    tops.push(v);
                    firsts.push(i);
                    seconds.push(-INF);
                }
                Some(g) => {
                    if v > tops[g] {
                        seconds[g] = tops[g];
                        tops[g] = v;
                        firsts[g] = i;
                    } else if v > seconds[g] {
                        seconds[g] = v; // a tie with the top lands here too: it makes the pair unsure
                    }
                }
            }
        }
        let rows: Vec<GroupRow> = (0..hs.len())
            .map(|g| {
                let i = firsts[g];
                (hs[g], i as i64, seconds[g], job_value(job.4, req, job.5, hs[g]), bases[i], neg_es[i])
            })
            .collect();
        per_job.push(rows);
    }
    ((top, first, second), per_job)
}

// ------------------------------------------------------------------------------------ for Python

fn index_error() -> PyErr {
    PyIndexError::new_err("tuple index out of range")
}

/// A parent map as the Python dict `kernels.dp` builds (same order).
fn parent_dict<'py>(py: Python<'py>, par: &ParentMap) -> PyResult<&'py PyDict> {
    let d = PyDict::new(py);
    for (&k, &v) in par {
        d.set_item(k, v)?;
    }
    Ok(d)
}

fn parents_tuple<'py>(py: Python<'py>, parents: &[ParentMap]) -> PyResult<&'py PyTuple> {
    let dicts = parents.iter().map(|p| parent_dict(py, p)).collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, dicts))
}

fn radix_tuple<'py>(py: Python<'py>, rad: &[Radix]) -> &'py PyTuple {
    PyTuple::new(py, rad.iter().map(|r| r.to_object(py)))
}

/// `kernels.job_value` for Python: `value` itself where the hours meet the requirement (so an int
/// value stays an int), `hours` an int or a float.
#[pyfunction]
fn kernels_job_value(py: Python<'_>, value: &PyAny, required: i64, partial_credit: f64, hours: &PyAny)
                     -> PyResult<PyObject> {
    let out = if let Ok(h) = hours.downcast::<PyFloat>() {
        let h = h.value();
        if float_ge_int(h, required) {
            return Ok(value.into_py(py));
        }
        job_value_f64(value.extract()?, required, partial_credit, h)
    } else {
        let h: i64 = hours.extract()?;
        if h >= required {
            return Ok(value.into_py(py));
        }
        job_value(value.extract()?, required, partial_credit, h)
    };
    Ok(out.into_py(py))
}

/// `kernels.radix` for Python: a tuple of (multiplier, radix) tuples.
#[pyfunction]
fn kernels_radix(py: Python<'_>, jobs: Vec<JobKey>) -> PyResult<&PyTuple> {
    Ok(radix_tuple(py, &radix(&jobs)?))
}

/// `kernels.solve_frontier` for Python: (radix, codes, neg_e, parents (a tuple of dicts), values
/// (a list; empty where there are no jobs)).
#[pyfunction]
fn kernels_solve_frontier(py: Python<'_>, blocks: Vec<BlockKey>, jobs: Vec<JobKey>) -> PyResult<&PyTuple> {
    let s = solve_frontier(&blocks, &jobs)?;
    let items: [PyObject; 5] = [
        radix_tuple(py, &s.radix).into(),
        PyTuple::new(py, &s.codes).into(),
        PyTuple::new(py, &s.neg_e).into(),
        parents_tuple(py, &s.parents)?.into(),
        PyList::new(py, &s.values).into(),
    ];
    Ok(PyTuple::new(py, items))
}

/// `kernels.best_plan` for Python: (best state's index, the job per block as a tuple); the
/// parent dicts are read in place.
#[pyfunction]
fn kernels_best_plan(py: Python<'_>, codes: Vec<i64>, neg_es: Vec<f64>, bases: Vec<f64>, parents: Vec<&PyDict>,
                     n_jobs: i64, budget: f64) -> PyResult<PyObject> {
    if neg_es.len() < codes.len() || bases.len() < codes.len() {
        return Err(index_error());
    }
    let (best_i, choices) = best_plan_with(&codes, &neg_es, &bases, parents.len(), n_jobs, budget,
                                           |b, state| -> PyResult<Option<i64>> {
        match parents[b].get_item(state) {
            Some(step) if !step.is_none() => Ok(Some(step.extract()?)),
            _ => Ok(None),
        }
    })?;
    Ok((best_i, PyTuple::new(py, choices)).into_py(py))
}

/// `kernels.dp` for Python: (the frontier as a dict in DP order, the parent dicts as a tuple).
#[pyfunction]
fn kernels_dp(py: Python<'_>, blocks: Vec<BlockKey>, jobs: Vec<JobKey>, radix: Vec<Radix>) -> PyResult<&PyTuple> {
    if radix.len() < jobs.len() {
        return Err(index_error());
    }
    let (frontier, parents) = dp(&blocks, &jobs, &radix)?;
    let d = PyDict::new(py);
    for (&k, &v) in &frontier {
        d.set_item(k, v)?;
    }
    let items: [PyObject; 2] = [d.into(), parents_tuple(py, &parents)?.into()];
    Ok(PyTuple::new(py, items))
}

/// `kernels.scan_extra` for Python: (best, choice); each state's tuple must hold one entry per job.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn kernels_scan_extra(jobs: Vec<JobKey>, states: Vec<Vec<i64>>, neg_es: Vec<f64>, vals: Vec<Vec<f64>>,
                      bases: Vec<f64>, extra: BlockKey, budget: f64) -> PyResult<(f64, i64)> {
    let n = states.len();
    let n_jobs = jobs.len();
    if neg_es.len() < n || bases.len() < n || vals.len() < n
        || states.iter().any(|s| s.len() != n_jobs)
        || vals[..n].iter().any(|v| v.len() != n_jobs)
    {
        return Err(index_error());
    }
    let flat_states: Vec<i64> = states.concat();
    let flat_vals: Vec<f64> = vals[..n].concat();
    Ok(scan_extra(&jobs, &flat_states, &neg_es[..n], &flat_vals, &bases[..n], extra, budget))
}

/// `kernels.grouped_extra` for Python: (best, choice), or None where it cannot be sure.
#[pyfunction]
fn kernels_grouped_extra(jobs: Vec<JobKey>, nojob: NoJob, per_job: Vec<Vec<GroupRow>>, extra: BlockKey,
                         clear: f64) -> PyResult<Option<(f64, i64)>> {
    let (_, end, rel, _) = extra;
    let reads_past = jobs
        .iter()
        .enumerate()
        .skip(per_job.len())
        .any(|(_, job)| end <= job.2 && rel >= job.3 && job.4 > 0.0 && job.0 > 0);
    if reads_past {
        return Err(index_error());
    }
    Ok(grouped_extra(&jobs, nojob, &per_job, extra, clear))
}

/// `kernels.state_values` for Python: a list of floats.
#[pyfunction]
fn kernels_state_values<'py>(py: Python<'py>, codes: Vec<i64>, jobs: Vec<JobKey>, radix: Vec<Radix>)
                             -> PyResult<&'py PyList> {
    if !codes.is_empty() && radix.len() < jobs.len() {
        return Err(index_error());
    }
    Ok(PyList::new(py, state_values(&codes, &jobs, &radix)?))
}

/// `kernels.frontier_groups` for Python: ((top, first, runner-up), per job a tuple of row tuples).
#[pyfunction]
fn kernels_frontier_groups(py: Python<'_>, jobs: Vec<JobKey>, columns: Vec<Vec<i64>>, bases: Vec<f64>,
                           neg_es: Vec<f64>) -> PyResult<PyObject> {
    let n = bases.len();
    if neg_es.len() < n || columns.len() < jobs.len() || columns[..jobs.len()].iter().any(|c| c.len() < n) {
        return Err(index_error());
    }
    let (nojob, per_job) = frontier_groups(&jobs, &columns, &bases, &neg_es);
    let groups = PyTuple::new(py, per_job.iter().map(|rows| PyTuple::new(py, rows.iter().map(|r| r.to_object(py)))));
    Ok((nojob, groups).into_py(py))
}

/// Adds the `kernels_<name>` functions to the module.
pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kernels_job_value, m)?)?;
    m.add_function(wrap_pyfunction!(kernels_radix, m)?)?;
    m.add_function(wrap_pyfunction!(kernels_solve_frontier, m)?)?;
    m.add_function(wrap_pyfunction!(kernels_best_plan, m)?)?;
    m.add_function(wrap_pyfunction!(kernels_dp, m)?)?;
    m.add_function(wrap_pyfunction!(kernels_scan_extra, m)?)?;
    m.add_function(wrap_pyfunction!(kernels_grouped_extra, m)?)?;
    m.add_function(wrap_pyfunction!(kernels_state_values, m)?)?;
    m.add_function(wrap_pyfunction!(kernels_frontier_groups, m)?)?;
    Ok(())
}
