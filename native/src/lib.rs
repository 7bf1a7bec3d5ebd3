//! GPU Arena's engine in Rust (see docs/decisions/0026-native-engine.md).
//!
//! The Python core (`gpu_arena.core`) is the specification; every module here mirrors one of it
//! and must give the same results bit for bit. Each module registers the functions and classes
//! the tests under `tests/native/` compare with the Python original.

use pyo3::prelude::*;

pub mod allocation;
pub mod convert;
pub mod engine;
pub mod engine_py;
pub mod judge;
pub mod kernels;
pub mod observe;
pub mod policies;
pub mod rng;
pub mod rules;
pub mod shocks;
pub mod types;
pub mod valuation;
pub mod value;
pub mod views;

#[pymodule]
fn gpu_arena_rs(py: Python, m: &PyModule) -> PyResult<()> {
    allocation::register(py, m)?;
    convert::register(py, m)?;
    engine_py::register(py, m)?;
    judge::register(py, m)?;
    kernels::register(py, m)?;
    observe::register(py, m)?;
    policies::register(py, m)?;
    rng::register(py, m)?;
    rules::auctions::register(py, m)?;
    rules::clock::register(py, m)?;
    rules::dispatch::register(py, m)?;
    valuation::register(py, m)?;
    value::register(py, m)?;
    // what the package's build compiled (setup.py passes them in): the loader compares them with
    // the crate and the Python core as they are now, so a stale build never plays unnoticed
    m.add("CRATE_DIGEST", option_env!("GPU_ARENA_CRATE_DIGEST").unwrap_or(""))?;
    m.add("CRATE_SOURCES", option_env!("GPU_ARENA_CRATE_SOURCES").unwrap_or("{}"))?;
    m.add("CRATE_MIRRORS", option_env!("GPU_ARENA_CRATE_MIRRORS").unwrap_or("{}"))?;
    Ok(())
}
