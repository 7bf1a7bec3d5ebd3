//! The Rust episode as Python sees it: `gpu_arena_rs.Episode`, which `gpu_arena.core.rs_engine`
//! wraps. Moves come in as the Python core's `Action`s (or `RejectedAction`s); a move whose
//! fields Rust cannot hold (an int beyond 64 bits, a lone surrogate, an object) raises
//! `ValueError` before anything changes, so the caller can play that round in Python.

use indexmap::IndexMap;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::once_cell::GILOnceCell;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

use crate::convert::{read_action, read_world, world_state};
use crate::engine::{ActionResult, Episode, Move, Record, RoundEntry, RoundReport, LEDGER_COLUMNS};
use crate::observe::{negotiator_reads, observe_priced, observe_with, WorldIndex};
use crate::policies::archetypes::make_negotiator;
use crate::policies::negotiator::{Negotiator, PolicyError};
use crate::policies::{negotiator_state, seeded, RandomPolicy};
use crate::views::SeatView;
use crate::views::{PyViewCache, ResultView};

fn record_dict<'p>(py: Python<'p>, record: &Record) -> PyResult<&'p PyDict> {
    let d = PyDict::new(py);
    for (k, v) in record {
        d.set_item(k, v.clone().into_py(py))?;
    }
    Ok(d)
}

fn entry_dict<'p>(py: Python<'p>, e: &RoundEntry) -> PyResult<&'p PyDict> {
    let d = PyDict::new(py);
    d.set_item("round", e.round)?;
    d.set_item("order", PyList::new(py, &e.order))?;
    let actions = PyDict::new(py);
    for (lid, r) in &e.actions {
        actions.set_item(lid, record_dict(py, r)?)?;
    }
    d.set_item("actions", actions)?;
    let results = PyDict::new(py);
    for (lid, ok, code) in &e.results {
        results.set_item(lid, PyList::new(py, [ok.to_object(py), code.to_object(py)]))?;
    }
    d.set_item("results", results)?;
    let rewards = PyDict::new(py);
    for (lid, r) in &e.rewards {
        rewards.set_item(lid, r)?;
    }
    d.set_item("rewards", rewards)?;
    Ok(d)
}

fn row_dict<'p>(py: Python<'p>, row: &[f64; 11]) -> PyResult<&'p PyDict> {
    let d = PyDict::new(py);
    for (c, v) in LEDGER_COLUMNS.iter().zip(row.iter()) {
        d.set_item(*c, v)?;
    }
    d.set_item("normalized_reward", row[10])?;
    Ok(d)
}

/// The Python core's `Action` and `RejectedAction` classes, looked up once.
static CLASSES: GILOnceCell<(Py<PyType>, Py<PyType>)> = GILOnceCell::new();

fn core_classes<'p>(py: Python<'p>) -> PyResult<&'p (Py<PyType>, Py<PyType>)> {
    if let Some(c) = CLASSES.get(py) {
        return Ok(c);
    }
    let types = py.import("gpu_arena.core.types")?;
    let pair: (Py<PyType>, Py<PyType>) = (types.getattr("Action")?.downcast::<PyType>()?.into(),
                                          types.getattr("RejectedAction")?.downcast::<PyType>()?.into());
    Ok(CLASSES.get_or_init(py, || pair))
}

/// A move as the engine takes it: None waits, an `Action` is read field by field, a
/// `RejectedAction` (or a subclass: an LLM's `FormatError`) stays refused with its code, anything
/// else is `malformed_action` (as `Episode.step`).
fn read_move(value: &PyAny) -> PyResult<Option<Move>> {
    if value.is_none() {
        return Ok(None);
    }
    let (action, rejected) = core_classes(value.py())?;
    if value.is_instance(rejected.as_ref(value.py()))? {
        return Ok(Some(Move::Rejected { code: value.getattr("code")?.extract()?, message: value.getattr("message")?.extract()? }));
    }
    if value.is_instance(action.as_ref(value.py()))? {
        return read_action(value).map(|a| Some(Move::Act(a)))
            .map_err(|e| PyValueError::new_err(format!("an action Rust cannot hold: {e}")));
    }
    let kind = value.get_type().name()?;
    Ok(Some(Move::Rejected { code: "malformed_action".into(), message: format!("cannot read an action from {kind}") }))
}

/// `gpu_arena_rs.Episode(world, controlled)`: the Python core's `Episode` in Rust (no model judge),
/// with the seats its archetypes play (`add_opponent`) deciding in Rust too.
#[pyclass(name = "Episode", unsendable)]
pub struct PyEpisode {
    inner: Episode,
    opponents: Vec<(String, Opponent)>,
    views: PyViewCache,
}

/// A seat Rust plays: an archetype (`Negotiator`, which reads the decision aids) or `random_valid`
/// (which reads none). A clone carries its parameters, kept state and random stream.
#[derive(Clone)]
enum Opponent {
    Archetype(Negotiator),
    Random(RandomPolicy),
}

impl Opponent {
    fn act(&mut self, view: &SeatView) -> Result<crate::types::Action, PolicyError> {
        match self {
            Opponent::Archetype(n) => n.act(view),
            Opponent::Random(r) => r.act(view),
        }
    }
}

/// Each lab's result as `(ok, code, message)` and its reward row, as Python dicts.
fn results_py<'p>(py: Python<'p>, results: &IndexMap<String, ActionResult>, rewards: &IndexMap<String, [f64; 11]>)
    -> PyResult<(&'p PyDict, &'p PyDict)> {
    let out = PyDict::new(py);
    for (lid, r) in results {
        out.set_item(lid, PyTuple::new(py, [r.ok.to_object(py), r.code.to_object(py), r.message.to_object(py)]))?;
    }
    let rows = PyDict::new(py);
    for (lid, row) in rewards {
        rows.set_item(lid, row_dict(py, row)?)?;
    }
    Ok((out, rows))
}

fn report_py(py: Python, report: &RoundReport) -> PyResult<PyObject> {
    let (results, rewards) = results_py(py, &report.results, &report.rewards)?;
    Ok((report.round_index, report.order.clone(), results, rewards, report.done).into_py(py))
}

#[pymethods]
impl PyEpisode {
    #[new]
    fn new(world: &PyAny, controlled: Vec<String>) -> PyResult<Self> {
        let world = read_world(world)?;
        Episode::new(world, controlled)
            .map(|inner| PyEpisode { inner, opponents: Vec::new(), views: PyViewCache::new() })
            .map_err(PyValueError::new_err)
    }

    /// An independent copy standing where this one stands (`Episode.fork`): the world and its
    /// random stream, the ledger, the transcript, the last results and rewards, and every
    /// opponent's state and random stream, so the same moves play the same from here on in both.
    /// The copy builds its own Python views (its view cache starts empty).
    fn fork(&self) -> PyEpisode {
        PyEpisode { inner: self.inner.clone(), opponents: self.opponents.clone(), views: PyViewCache::new() }
    }

    /// Seat `lab_id` is played by the archetype `archetype` (as `make_policy(archetype, seed=seed,
    /// **params)`), deciding in Rust on its own view each `step_seat`.
    fn add_opponent(&mut self, lab_id: String, archetype: &str, seed: &PyAny, params: &PyDict) -> PyResult<()> {
        if !self.inner.world.labs.contains_key(&lab_id) {
            return Err(PyValueError::new_err(format!("unknown seat {lab_id:?}")));
        }
        let mut values: IndexMap<String, f64> = IndexMap::new();
        for (k, v) in params.iter() {
            values.insert(k.extract()?, v.extract()?);
        }
        let policy = if archetype == "random_valid" {
            // RandomPolicy(seed, invalid_rate=0.0, risk=0.3), given the parameters it accepts
            let get = |k: &str, d: f64| values.get(k).copied().unwrap_or(d);
            Opponent::Random(RandomPolicy::new(seeded(seed)?, get("invalid_rate", 0.0), get("risk", 0.3)))
        } else {
            Opponent::Archetype(make_negotiator(archetype, seeded(seed)?, &values)
                .ok_or_else(|| PyValueError::new_err(format!("no archetype {archetype:?} in Rust")))?)
        };
        self.opponents.push((lab_id, policy));
        Ok(())
    }

    /// One round: `seat` plays `move` (a core `Action`, `RejectedAction` or None), every seat
    /// added with `add_opponent` plays its archetype's move on its own view (`policy_move`).
    /// Returns the round's report as `step` does, or None without `report` (the environment
    /// reads the seat's observation instead).
    #[args(report = "true")]
    fn step_seat(&mut self, py: Python, seat: String, r#move: &PyAny, report: bool) -> PyResult<PyObject> {
        let mut moves: IndexMap<String, Move> = IndexMap::new();
        if let Some(m) = read_move(r#move)? {
            moves.insert(seat, m);
        }
        let world = &self.inner.world;
        let index = WorldIndex::new(world);
        for (lid, policy) in self.opponents.iter_mut() {
            let frontiers = Some(self.inner.frontiers.clone());
            let view = match policy {
                Opponent::Archetype(_) => {
                    let reads = negotiator_reads(world, lid);
                    observe_priced(world, &index, lid, None, 0.0, None, true, frontiers, Some(&reads))
                }
                // it reads no aids (`uses_aids = False`): its view has none, as in Python
                Opponent::Random(_) => observe_with(world, &index, lid, None, 0.0, None, false, frontiers),
            };
            let chosen = match policy.act(&view) {
                Ok(a) => Move::Act(a),
                Err(e) => Move::Rejected { code: "policy_error".into(), message: e.to_string() },
            };
            moves.insert(lid.clone(), chosen);
        }
        let round = self.inner.step(&moves).map_err(PyRuntimeError::new_err)?;
        if report {
            report_py(py, &round)
        } else {
            Ok(py.None())
        }
    }

    /// The last round's report, as `step` returned it.
    fn last_report(&self, py: Python) -> PyResult<PyObject> {
        let ep = &self.inner;
        let entry = ep.transcript.last().ok_or_else(|| PyRuntimeError::new_err("no round played yet"))?;
        let round = RoundReport {
            round_index: entry.round, order: entry.order.clone(), results: ep.last_results.clone(),
            rewards: ep.last_rewards.clone(), done: ep.world.done,
        };
        report_py(py, &round)
    }

    /// Each opponent's parameters and kept state (`gpu_arena_rs.Negotiator.state`), by seat.
    fn opponent_states(&self, py: Python) -> PyResult<PyObject> {
        let d = PyDict::new(py);
        for (lid, policy) in &self.opponents {
            let state = match policy {
                Opponent::Archetype(n) => negotiator_state(py, n)?,
                Opponent::Random(r) => {
                    let s = PyDict::new(py);
                    s.set_item("invalid_rate", r.invalid_rate)?;
                    s.set_item("risk", r.risk)?;
                    s.set_item("rng", r.rng.to_py_state(py)?)?;
                    s.into()
                }
            };
            d.set_item(lid, state)?;
        }
        Ok(d.into())
    }

    /// `(ok, code, message)` of each lab's last move, and its last reward row.
    fn last(&self, py: Python) -> PyResult<PyObject> {
        Ok(results_py(py, &self.inner.last_results, &self.inner.last_rewards)?.into_py(py))
    }

    /// `Episode.observe(lab_id, aids=aids)`: the seat's view (with every aid priced), as the
    /// Python core's `SeatView`, its last result and reward row included.
    fn observe(&mut self, py: Python, lab_id: &str, aids: bool) -> PyResult<PyObject> {
        let ep = &self.inner;
        if !ep.world.labs.contains_key(lab_id) {
            return Err(pyo3::exceptions::PyKeyError::new_err(lab_id.to_string()));
        }
        let last = ep.last_results.get(lab_id).map(|r| ResultView { ok: r.ok, code: r.code.clone(), message: r.message.clone() });
        let row = ep.last_rewards.get(lab_id);
        let breakdown: Option<IndexMap<String, f64>> = row.map(|row| {
            LEDGER_COLUMNS.iter().map(|c| c.to_string()).zip(row.iter().copied())
                .chain(std::iter::once(("normalized_reward".to_string(), row[10]))).collect()
        });
        let index = WorldIndex::new(&ep.world);
        let view = observe_with(&ep.world, &index, lab_id, last.as_ref(), row.map_or(0.0, |r| r[10]),
                                breakdown.as_ref(), aids, Some(ep.frontiers.clone()));
        self.views.seat_to_py(py, &view)
    }

    #[getter]
    fn done(&self) -> bool {
        self.inner.done()
    }

    /// `step(moves)`: `(round_index, order, {lab: (ok, code, message)}, {lab: reward row}, done)`.
    fn step(&mut self, py: Python, moves: &PyDict) -> PyResult<PyObject> {
        let mut read: IndexMap<String, Move> = IndexMap::new();
        for (k, v) in moves.iter() {
            if let Some(m) = read_move(v)? {
                read.insert(k.extract()?, m);
            }
        }
        let report = self.inner.step(&read).map_err(PyRuntimeError::new_err)?;
        report_py(py, &report)
    }

    /// The transcript from round `start` on, as the Python episode's (`Episode.transcript`).
    #[args(start = "0")]
    fn transcript(&self, py: Python, start: usize) -> PyResult<PyObject> {
        let entries = self.inner.transcript.iter().skip(start)
            .map(|e| entry_dict(py, e).map(|d| d.to_object(py)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyList::new(py, entries).into())
    }

    fn world_state(&self, py: Python) -> PyResult<PyObject> {
        world_state(py, &self.inner.world)
    }

    /// `(phi, returns, penalties)` by lab.
    fn ledger(&self, py: Python) -> PyResult<PyObject> {
        let phi = PyDict::new(py);
        for (k, v) in &self.inner.phi {
            phi.set_item(k, *v)?;
        }
        let returns = PyDict::new(py);
        for (k, v) in &self.inner.returns {
            returns.set_item(k, *v)?;
        }
        let penalties = PyDict::new(py);
        for (k, v) in &self.inner.penalties {
            penalties.set_item(k, *v)?;
        }
        Ok((phi, returns, penalties).into_py(py))
    }
}

pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_class::<PyEpisode>()?;
    Ok(())
}
