//! The Rust episode as Python sees it: `gpu_arena_rs.Episode`, which `gpu_arena.core.rs_engine`
//! wraps. Moves come in as the Python core's `Action`s (or `RejectedAction`s); a move whose
//! fields Rust cannot hold (an int beyond 64 bits, a lone surrogate, an object) raises
//! `ValueError` before anything changes, so the caller can play that round in Python.

use indexmap::IndexMap;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::convert::{read_action, read_world, world_state};
use crate::engine::{Episode, Move, Record, RoundEntry, LEDGER_COLUMNS};

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

/// A move as the engine takes it: None waits, an `Action` is read field by field, a
/// `RejectedAction` stays refused, anything else is `malformed_action` (as `Episode.step`).
fn read_move(value: &PyAny) -> PyResult<Option<Move>> {
    if value.is_none() {
        return Ok(None);
    }
    let kind = value.get_type().name()?;
    if kind == "RejectedAction" {
        return Ok(Some(Move::Rejected { code: value.getattr("code")?.extract()?, message: value.getattr("message")?.extract()? }));
    }
    if kind == "Action" {
        return read_action(value).map(|a| Some(Move::Act(a)))
            .map_err(|e| PyValueError::new_err(format!("an action Rust cannot hold: {e}")));
    }
    Ok(Some(Move::Rejected { code: "malformed_action".into(), message: format!("cannot read an action from {kind}") }))
}

/// `gpu_arena_rs.Episode(world, controlled)`: the Python core's `Episode` in Rust (no model judge).
#[pyclass(name = "Episode", unsendable)]
pub struct PyEpisode {
    inner: Episode,
}

#[pymethods]
impl PyEpisode {
    #[new]
    fn new(world: &PyAny, controlled: Vec<String>) -> PyResult<Self> {
        let world = read_world(world)?;
        Episode::new(world, controlled).map(|inner| PyEpisode { inner }).map_err(PyValueError::new_err)
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
        let results = PyDict::new(py);
        for (lid, r) in &report.results {
            results.set_item(lid, PyTuple::new(py, [r.ok.to_object(py), r.code.to_object(py), r.message.to_object(py)]))?;
        }
        let rewards = PyDict::new(py);
        for (lid, row) in &report.rewards {
            rewards.set_item(lid, row_dict(py, row)?)?;
        }
        Ok((report.round_index, report.order, results, rewards, report.done).into_py(py))
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
