//! Python's value semantics, as the port of the core needs them, in plain Rust.
//!
//! The Python core (`gpu_arena.core`, its rules, `engine.py`, `shocks.py` and
//! `gpu_arena.policies.negotiator`) writes its messages and transcripts with Python's `repr()`,
//! `str()` and format specs, and computes with `round(x, n)`, `math.fsum`, `ordered_sum`
//! (`core/sums.py`: floats added left to right from `0.0`, never the built-in `sum`, which 3.12
//! made compensated) and floor division. This module mirrors each of them bit for bit, as CPython
//! 3.11 computes them (3.12 also changed `math.fsum` of `-0.0`):
//!
//! * [`PyValue`]: a JSON-like Python value, as an action's fields hold them (see `action_record`
//!   in `engine.py`), with `FromPyObject`/`IntoPy`, [`PyValue::repr`] (`repr()`) and
//!   [`PyValue::str`] (`str()`); [`repr_str`] and [`repr_float`] for bare strings and floats.
//! * [`format_float`]: `format(x, spec)` / f-string `{x:spec}` of a float.
//! * [`py_round`] / [`checked_py_round`]: `round(x, ndigits)` of a float.
//! * [`fsum`] / [`try_fsum`]: `math.fsum`; [`ordered_sum`]: the core's `ordered_sum` of floats.
//! * [`py_floordiv_f64`], [`py_mod_f64`], [`py_divmod_f64`], [`py_floordiv_i64`], [`py_mod_i64`]:
//!   `//`, `%` and `divmod` with Python's floor semantics.
//! * [`is_py_space`], [`py_strip`], [`py_len`], [`py_prefix`]: `str.isspace`, `str.strip()`,
//!   `len(s)` and `s[:n]` (code points, not bytes) for the core's message checks.
//!
//! Format specs and conversions the core and the negotiator use (an AST walk over
//! `src/gpu_arena/core/**.py` and `src/gpu_arena/policies/*.py`; all are covered here):
//!
//! | spec      | where                                                   | covered by                |
//! |-----------|---------------------------------------------------------|---------------------------|
//! | `{x}`     | ids, ints and floats in messages (str of the value)     | [`PyValue::str`], [`repr_float`] |
//! | `{x!r}`   | ids in refusals, `{value!r}` in `rules/checks.py`       | [`PyValue::repr`]          |
//! | `:.2f`    | payments, bids, budgets, energy (rules, views, shocks)  | [`format_float`]           |
//! | `:.1f`    | the judge's score (`judge.py`)                          | [`format_float`]           |
//! | `:+.2f`   | surplus and offer values (`views.py`)                   | [`format_float`]           |
//! | `:+.3f`   | the judge's adjustment (`judge.py`)                     | [`format_float`]           |
//! | `:g`      | `MAX_PAYMENT` (`rules/checks.py`), GPU-hours (`judge.py`) | [`format_float`]         |
//!
//! `round(x, n)` is used with `n` in {2, 3, 4, 6, 12}; `round(x)` without `ndigits` is not used;
//! `math.fsum` closes each round's reward row (`engine.py`); `ordered_sum` adds floats across the
//! core (energy, shares, values in `negotiator.py` and the rules) and the built-in `sum` ints only
//! (GPU-hours, counts: iterator `.sum()` of `i64` here); `//` and `%` appear on
//! ints only, once on a negative numerator (`-(-a // b)`, a ceiling division in `worldgen.py`).
//!
//! Python ints are carried as `i64`: an int outside `i64` is refused on extraction (an
//! `OverflowError`, as PyO3 raises it) rather than approximated. Strings are Rust `String`s: a
//! Python string holding a lone surrogate cannot be carried and is refused with the
//! `UnicodeEncodeError` Python's own UTF-8 encoder raises (`engine._text` writes such a message as
//! its escapes before it reaches the transcript).

use std::fmt;

use pyo3::exceptions::{PyOverflowError, PyValueError, PyZeroDivisionError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyLong, PyString, PyTuple};

// ---------------------------------------------------------------------------------- the value

/// A JSON-like Python value: `None`, `bool`, `int` (within `i64`), `float`, `str`, and lists,
/// tuples and dicts of those (nested to any depth up to [`MAX_DEPTH`]).
///
/// A dict is its `(key, value)` pairs in insertion order, as Python keeps them. Subclasses of
/// `str`, `int`, `float`, `list`, `tuple` and `dict` are read as their base type (their value,
/// not their own `__repr__`), the way `json.dumps` reads them; a `bool` is never an `Int`.
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An `int` within `i64`.
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str` (without lone surrogates).
    Str(String),
    /// A `list`.
    List(Vec<PyValue>),
    /// A `tuple`.
    Tuple(Vec<PyValue>),
    /// A `dict`: its items in insertion order.
    Dict(Vec<(PyValue, PyValue)>),
}

/// How deeply lists, tuples and dicts may nest on extraction. A deeper (or self-containing)
/// value is refused with `ValueError` rather than overflowing the stack; Python's `repr` would
/// print a self-containing list as `[[...]]`, which no transcript holds.
pub const MAX_DEPTH: usize = 200;

impl PyValue {
    /// `type(value).__name__`.
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "NoneType",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::List(_) => "list",
            PyValue::Tuple(_) => "tuple",
            PyValue::Dict(_) => "dict",
        }
    }

    /// Python's truthiness (`bool(value)`); NaN is truthy: it is not equal to zero.
    pub fn truthy(&self) -> bool {
        match self {
            PyValue::None => false,
            PyValue::Bool(b) => *b,
            PyValue::Int(i) => *i != 0,
            PyValue::Float(x) => *x != 0.0,
            PyValue::Str(s) => !s.is_empty(),
            PyValue::List(xs) | PyValue::Tuple(xs) => !xs.is_empty(),
            PyValue::Dict(kv) => !kv.is_empty(),
        }
    }
    /// Python's `repr(value)`.
    pub fn repr(&self) -> String {
        let mut out = String::new();
        self.write_repr(&mut out);
        out
    }

    /// Python's `str(value)`: a string is itself, everything else is its `repr` (Python 3's
    /// `str` of a float, an int, a bool or `None` equals its `repr`, and containers show their
    /// items' `repr`).
    pub fn str(&self) -> String {
        match self {
            PyValue::Str(s) => s.clone(),
            other => other.repr(),
        }
    }

    fn write_repr(&self, out: &mut String) {
        match self {
            PyValue::None => out.push_str("None"),
            PyValue::Bool(true) => out.push_str("True"),
            PyValue::Bool(false) => out.push_str("False"),
            PyValue::Int(i) => out.push_str(&i.to_string()),
            PyValue::Float(x) => out.push_str(&repr_float(*x)),
            PyValue::Str(s) => write_repr_str(s, out),
            PyValue::List(items) => {
                out.push('[');
                write_items(items, out);
                out.push(']');
            }
            PyValue::Tuple(items) => {
                out.push('(');
                write_items(items, out);
                if items.len() == 1 {
                    out.push(',');
                }
                out.push(')');
            }
            PyValue::Dict(items) => {
                out.push('{');
                for (i, (k, v)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    k.write_repr(out);
                    out.push_str(": ");
                    v.write_repr(out);
                }
                out.push('}');
            }
        }
    }

    fn extract_at(ob: &PyAny, depth: usize) -> PyResult<Self> {
        if ob.is_none() {
            return Ok(PyValue::None);
        }
        // bool first: it is a subclass of int
        if let Ok(b) = ob.downcast::<PyBool>() {
            return Ok(PyValue::Bool(b.is_true()));
        }
        if ob.downcast::<PyLong>().is_ok() {
            // PyLong_AsLongLong: the int's own value (subclasses included); OverflowError outside i64
            return Ok(PyValue::Int(ob.extract::<i64>()?));
        }
        if let Ok(f) = ob.downcast::<PyFloat>() {
            return Ok(PyValue::Float(f.value()));
        }
        if let Ok(s) = ob.downcast::<PyString>() {
            // UnicodeEncodeError ("surrogates not allowed") for a lone surrogate
            return Ok(PyValue::Str(s.to_str()?.to_owned()));
        }
        let is_container = ob.downcast::<PyList>().is_ok()
            || ob.downcast::<PyTuple>().is_ok()
            || ob.downcast::<PyDict>().is_ok();
        if is_container && depth >= MAX_DEPTH {
            return Err(PyValueError::new_err(format!(
                "value nested deeper than {MAX_DEPTH} levels"
            )));
        }
        if let Ok(list) = ob.downcast::<PyList>() {
            let mut items = Vec::with_capacity(list.len());
            for item in list.iter() {
                items.push(PyValue::extract_at(item, depth + 1)?);
            }
            return Ok(PyValue::List(items));
        }
        if let Ok(tuple) = ob.downcast::<PyTuple>() {
            let items = tuple
                .iter()
                .map(|item| PyValue::extract_at(item, depth + 1))
                .collect::<PyResult<Vec<_>>>()?;
            return Ok(PyValue::Tuple(items));
        }
        if let Ok(dict) = ob.downcast::<PyDict>() {
            let mut items = Vec::with_capacity(dict.len());
            for (k, v) in dict.iter() {
                items.push((
                    PyValue::extract_at(k, depth + 1)?,
                    PyValue::extract_at(v, depth + 1)?,
                ));
            }
            return Ok(PyValue::Dict(items));
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected None, bool, int, float, str, list, tuple or dict, not {}",
            ob.get_type().name()?
        )))
    }

    /// The Python object, or the error Python raises building it: a dict whose key is a list or
    /// a dict (possible only for a value built in Rust) fails with `TypeError: unhashable type`.
    pub fn try_into_py(self, py: Python<'_>) -> PyResult<PyObject> {
        Ok(match self {
            PyValue::None => py.None(),
            PyValue::Bool(b) => b.into_py(py),
            PyValue::Int(i) => i.into_py(py),
            PyValue::Float(x) => x.into_py(py),
            PyValue::Str(s) => s.into_py(py),
            PyValue::List(items) => {
                let objs = items
                    .into_iter()
                    .map(|v| v.try_into_py(py))
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, objs).into()
            }
            PyValue::Tuple(items) => {
                let objs = items
                    .into_iter()
                    .map(|v| v.try_into_py(py))
                    .collect::<PyResult<Vec<_>>>()?;
                PyTuple::new(py, objs).into()
            }
            PyValue::Dict(items) => {
                // later duplicates overwrite earlier ones in place, as `dict(pairs)` does
                let dict = PyDict::new(py);
                for (k, v) in items {
                    dict.set_item(k.try_into_py(py)?, v.try_into_py(py)?)?;
                }
                dict.into()
            }
        })
    }
}

fn write_items(items: &[PyValue], out: &mut String) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        item.write_repr(out);
    }
}

/// `str(value)`, as `print` and f-strings `{value}` write it.
impl fmt::Display for PyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PyValue::Str(s) => f.write_str(s),
            other => f.write_str(&other.repr()),
        }
    }
}

/// Reads a Python value: `None`; `bool` (checked before `int`); `int` and its subclasses within
/// `i64` (outside it: `OverflowError`); `float` and subclasses; `str` and subclasses (a lone
/// surrogate: `UnicodeEncodeError`); `list`, `tuple`, `dict` and subclasses, read by their
/// storage as `list.__iter__`/`dict.items` would (nested at most [`MAX_DEPTH`] deep, else
/// `ValueError`). Anything else is a `TypeError`.
impl<'source> FromPyObject<'source> for PyValue {
    fn extract(ob: &'source PyAny) -> PyResult<Self> {
        PyValue::extract_at(ob, 0)
    }
}

/// The Python object of the value's own type (`list`, `tuple`, `dict`, `str`, ...).
///
/// Panics only for a dict keyed by a list or a dict, which no value read from Python holds (use
/// [`PyValue::try_into_py`] for values built in Rust that might).
impl IntoPy<PyObject> for PyValue {
    fn into_py(self, py: Python<'_>) -> PyObject {
        self.try_into_py(py)
            .expect("PyValue::into_py: a dict key must be hashable (not a list or dict)")
    }
}

/// As [`IntoPy`], from a borrowed value.
impl ToPyObject for PyValue {
    fn to_object(&self, py: Python<'_>) -> PyObject {
        self.clone().into_py(py)
    }
}

// ---------------------------------------------------------------------------------- strings

// `str.isprintable()` of Python 3.11 (Unicode 14.0.0) is false exactly on these inclusive
// code-point ranges (categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than the space), generated
// with `[not chr(c).isprintable() for c in range(0x110000)]` on the project's Python 3.11.7.
#[rustfmt::skip]
const NON_PRINTABLE: [(u32, u32); 701] = [
    (0x0, 0x1F), (0x7F, 0xA0), (0xAD, 0xAD), (0x378, 0x379), (0x380, 0x383), (0x38B, 0x38B),
    (0x38D, 0x38D), (0x3A2, 0x3A2), (0x530, 0x530), (0x557, 0x558), (0x58B, 0x58C), (0x590, 0x590),
    (0x5C8, 0x5CF), (0x5EB, 0x5EE), (0x5F5, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70E, 0x70F),
    (0x74B, 0x74C), (0x7B2, 0x7BF), (0x7FB, 0x7FC), (0x82E, 0x82F), (0x83F, 0x83F), (0x85C, 0x85D),
    (0x85F, 0x85F), (0x86B, 0x86F), (0x88F, 0x897), (0x8E2, 0x8E2), (0x984, 0x984), (0x98D, 0x98E),
    (0x991, 0x992), (0x9A9, 0x9A9), (0x9B1, 0x9B1), (0x9B3, 0x9B5), (0x9BA, 0x9BB), (0x9C5, 0x9C6),
    (0x9C9, 0x9CA), (0x9CF, 0x9D6), (0x9D8, 0x9DB), (0x9DE, 0x9DE), (0x9E4, 0x9E5), (0x9FF, 0xA00),
    (0xA04, 0xA04), (0xA0B, 0xA0E), (0xA11, 0xA12), (0xA29, 0xA29), (0xA31, 0xA31), (0xA34, 0xA34),
    (0xA37, 0xA37), (0xA3A, 0xA3B), (0xA3D, 0xA3D), (0xA43, 0xA46), (0xA49, 0xA4A), (0xA4E, 0xA50),
    (0xA52, 0xA58), (0xA5D, 0xA5D), (0xA5F, 0xA65), (0xA77, 0xA80), (0xA84, 0xA84), (0xA8E, 0xA8E),
    (0xA92, 0xA92), (0xAA9, 0xAA9), (0xAB1, 0xAB1), (0xAB4, 0xAB4), (0xABA, 0xABB), (0xAC6, 0xAC6),
    (0xACA, 0xACA), (0xACE, 0xACF), (0xAD1, 0xADF), (0xAE4, 0xAE5), (0xAF2, 0xAF8), (0xB00, 0xB00),
    (0xB04, 0xB04), (0xB0D, 0xB0E), (0xB11, 0xB12), (0xB29, 0xB29), (0xB31, 0xB31), (0xB34, 0xB34),
    (0xB3A, 0xB3B), (0xB45, 0xB46), (0xB49, 0xB4A), (0xB4E, 0xB54), (0xB58, 0xB5B), (0xB5E, 0xB5E),
    (0xB64, 0xB65), (0xB78, 0xB81), (0xB84, 0xB84), (0xB8B, 0xB8D), (0xB91, 0xB91), (0xB96, 0xB98),
    (0xB9B, 0xB9B), (0xB9D, 0xB9D), (0xBA0, 0xBA2), (0xBA5, 0xBA7), (0xBAB, 0xBAD), (0xBBA, 0xBBD),
    (0xBC3, 0xBC5), (0xBC9, 0xBC9), (0xBCE, 0xBCF), (0xBD1, 0xBD6), (0xBD8, 0xBE5), (0xBFB, 0xBFF),
    (0xC0D, 0xC0D), (0xC11, 0xC11), (0xC29, 0xC29), (0xC3A, 0xC3B), (0xC45, 0xC45), (0xC49, 0xC49),
    (0xC4E, 0xC54), (0xC57, 0xC57), (0xC5B, 0xC5C), (0xC5E, 0xC5F), (0xC64, 0xC65), (0xC70, 0xC76),
    (0xC8D, 0xC8D), (0xC91, 0xC91), (0xCA9, 0xCA9), (0xCB4, 0xCB4), (0xCBA, 0xCBB), (0xCC5, 0xCC5),
    (0xCC9, 0xCC9), (0xCCE, 0xCD4), (0xCD7, 0xCDC), (0xCDF, 0xCDF), (0xCE4, 0xCE5), (0xCF0, 0xCF0),
    (0xCF3, 0xCFF), (0xD0D, 0xD0D), (0xD11, 0xD11), (0xD45, 0xD45), (0xD49, 0xD49), (0xD50, 0xD53),
    (0xD64, 0xD65), (0xD80, 0xD80), (0xD84, 0xD84), (0xD97, 0xD99), (0xDB2, 0xDB2), (0xDBC, 0xDBC),
    (0xDBE, 0xDBF), (0xDC7, 0xDC9), (0xDCB, 0xDCE), (0xDD5, 0xDD5), (0xDD7, 0xDD7), (0xDE0, 0xDE5),
    (0xDF0, 0xDF1), (0xDF5, 0xE00), (0xE3B, 0xE3E), (0xE5C, 0xE80), (0xE83, 0xE83), (0xE85, 0xE85),
    (0xE8B, 0xE8B), (0xEA4, 0xEA4), (0xEA6, 0xEA6), (0xEBE, 0xEBF), (0xEC5, 0xEC5), (0xEC7, 0xEC7),
    (0xECE, 0xECF), (0xEDA, 0xEDB), (0xEE0, 0xEFF), (0xF48, 0xF48), (0xF6D, 0xF70), (0xF98, 0xF98),
    (0xFBD, 0xFBD), (0xFCD, 0xFCD), (0xFDB, 0xFFF), (0x10C6, 0x10C6), (0x10C8, 0x10CC),
    (0x10CE, 0x10CF), (0x1249, 0x1249), (0x124E, 0x124F), (0x1257, 0x1257), (0x1259, 0x1259),
    (0x125E, 0x125F), (0x1289, 0x1289), (0x128E, 0x128F), (0x12B1, 0x12B1), (0x12B6, 0x12B7),
    (0x12BF, 0x12BF), (0x12C1, 0x12C1), (0x12C6, 0x12C7), (0x12D7, 0x12D7), (0x1311, 0x1311),
    (0x1316, 0x1317), (0x135B, 0x135C), (0x137D, 0x137F), (0x139A, 0x139F), (0x13F6, 0x13F7),
    (0x13FE, 0x13FF), (0x1680, 0x1680), (0x169D, 0x169F), (0x16F9, 0x16FF), (0x1716, 0x171E),
    (0x1737, 0x173F), (0x1754, 0x175F), (0x176D, 0x176D), (0x1771, 0x1771), (0x1774, 0x177F),
    (0x17DE, 0x17DF), (0x17EA, 0x17EF), (0x17FA, 0x17FF), (0x180E, 0x180E), (0x181A, 0x181F),
    (0x1879, 0x187F), (0x18AB, 0x18AF), (0x18F6, 0x18FF), (0x191F, 0x191F), (0x192C, 0x192F),
    (0x193C, 0x193F), (0x1941, 0x1943), (0x196E, 0x196F), (0x1975, 0x197F), (0x19AC, 0x19AF),
    (0x19CA, 0x19CF), (0x19DB, 0x19DD), (0x1A1C, 0x1A1D), (0x1A5F, 0x1A5F), (0x1A7D, 0x1A7E),
    (0x1A8A, 0x1A8F), (0x1A9A, 0x1A9F), (0x1AAE, 0x1AAF), (0x1ACF, 0x1AFF), (0x1B4D, 0x1B4F),
    (0x1B7F, 0x1B7F), (0x1BF4, 0x1BFB), (0x1C38, 0x1C3A), (0x1C4A, 0x1C4C), (0x1C89, 0x1C8F),
    (0x1CBB, 0x1CBC), (0x1CC8, 0x1CCF), (0x1CFB, 0x1CFF), (0x1F16, 0x1F17), (0x1F1E, 0x1F1F),
    (0x1F46, 0x1F47), (0x1F4E, 0x1F4F), (0x1F58, 0x1F58), (0x1F5A, 0x1F5A), (0x1F5C, 0x1F5C),
    (0x1F5E, 0x1F5E), (0x1F7E, 0x1F7F), (0x1FB5, 0x1FB5), (0x1FC5, 0x1FC5), (0x1FD4, 0x1FD5),
    (0x1FDC, 0x1FDC), (0x1FF0, 0x1FF1), (0x1FF5, 0x1FF5), (0x1FFF, 0x200F), (0x2028, 0x202F),
    (0x205F, 0x206F), (0x2072, 0x2073), (0x208F, 0x208F), (0x209D, 0x209F), (0x20C1, 0x20CF),
    (0x20F1, 0x20FF), (0x218C, 0x218F), (0x2427, 0x243F), (0x244B, 0x245F), (0x2B74, 0x2B75),
    (0x2B96, 0x2B96), (0x2CF4, 0x2CF8), (0x2D26, 0x2D26), (0x2D28, 0x2D2C), (0x2D2E, 0x2D2F),
    (0x2D68, 0x2D6E), (0x2D71, 0x2D7E), (0x2D97, 0x2D9F), (0x2DA7, 0x2DA7), (0x2DAF, 0x2DAF),
    (0x2DB7, 0x2DB7), (0x2DBF, 0x2DBF), (0x2DC7, 0x2DC7), (0x2DCF, 0x2DCF), (0x2DD7, 0x2DD7),
    (0x2DDF, 0x2DDF), (0x2E5E, 0x2E7F), (0x2E9A, 0x2E9A), (0x2EF4, 0x2EFF), (0x2FD6, 0x2FEF),
    (0x2FFC, 0x3000), (0x3040, 0x3040), (0x3097, 0x3098), (0x3100, 0x3104), (0x3130, 0x3130),
    (0x318F, 0x318F), (0x31E4, 0x31EF), (0x321F, 0x321F), (0xA48D, 0xA48F), (0xA4C7, 0xA4CF),
    (0xA62C, 0xA63F), (0xA6F8, 0xA6FF), (0xA7CB, 0xA7CF), (0xA7D2, 0xA7D2), (0xA7D4, 0xA7D4),
    (0xA7DA, 0xA7F1), (0xA82D, 0xA82F), (0xA83A, 0xA83F), (0xA878, 0xA87F), (0xA8C6, 0xA8CD),
    (0xA8DA, 0xA8DF), (0xA954, 0xA95E), (0xA97D, 0xA97F), (0xA9CE, 0xA9CE), (0xA9DA, 0xA9DD),
    (0xA9FF, 0xA9FF), (0xAA37, 0xAA3F), (0xAA4E, 0xAA4F), (0xAA5A, 0xAA5B), (0xAAC3, 0xAADA),
    (0xAAF7, 0xAB00), (0xAB07, 0xAB08), (0xAB0F, 0xAB10), (0xAB17, 0xAB1F), (0xAB27, 0xAB27),
    (0xAB2F, 0xAB2F), (0xAB6C, 0xAB6F), (0xABEE, 0xABEF), (0xABFA, 0xABFF), (0xD7A4, 0xD7AF),
    (0xD7C7, 0xD7CA), (0xD7FC, 0xF8FF), (0xFA6E, 0xFA6F), (0xFADA, 0xFAFF), (0xFB07, 0xFB12),
    (0xFB18, 0xFB1C), (0xFB37, 0xFB37), (0xFB3D, 0xFB3D), (0xFB3F, 0xFB3F), (0xFB42, 0xFB42),
    (0xFB45, 0xFB45), (0xFBC3, 0xFBD2), (0xFD90, 0xFD91), (0xFDC8, 0xFDCE), (0xFDD0, 0xFDEF),
    (0xFE1A, 0xFE1F), (0xFE53, 0xFE53), (0xFE67, 0xFE67), (0xFE6C, 0xFE6F), (0xFE75, 0xFE75),
    (0xFEFD, 0xFF00), (0xFFBF, 0xFFC1), (0xFFC8, 0xFFC9), (0xFFD0, 0xFFD1), (0xFFD8, 0xFFD9),
    (0xFFDD, 0xFFDF), (0xFFE7, 0xFFE7), (0xFFEF, 0xFFFB), (0xFFFE, 0xFFFF), (0x1000C, 0x1000C),
    (0x10027, 0x10027), (0x1003B, 0x1003B), (0x1003E, 0x1003E), (0x1004E, 0x1004F),
    (0x1005E, 0x1007F), (0x100FB, 0x100FF), (0x10103, 0x10106), (0x10134, 0x10136),
    (0x1018F, 0x1018F), (0x1019D, 0x1019F), (0x101A1, 0x101CF), (0x101FE, 0x1027F),
    (0x1029D, 0x1029F), (0x102D1, 0x102DF), (0x102FC, 0x102FF), (0x10324, 0x1032C),
    (0x1034B, 0x1034F), (0x1037B, 0x1037F), (0x1039E, 0x1039E), (0x103C4, 0x103C7),
    (0x103D6, 0x103FF), (0x1049E, 0x1049F), (0x104AA, 0x104AF), (0x104D4, 0x104D7),
    (0x104FC, 0x104FF), (0x10528, 0x1052F), (0x10564, 0x1056E), (0x1057B, 0x1057B),
    (0x1058B, 0x1058B), (0x10593, 0x10593), (0x10596, 0x10596), (0x105A2, 0x105A2),
    (0x105B2, 0x105B2), (0x105BA, 0x105BA), (0x105BD, 0x105FF), (0x10737, 0x1073F),
    (0x10756, 0x1075F), (0x10768, 0x1077F), (0x10786, 0x10786), (0x107B1, 0x107B1),
    (0x107BB, 0x107FF), (0x10806, 0x10807), (0x10809, 0x10809), (0x10836, 0x10836),
    (0x10839, 0x1083B), (0x1083D, 0x1083E), (0x10856, 0x10856), (0x1089F, 0x108A6),
    (0x108B0, 0x108DF), (0x108F3, 0x108F3), (0x108F6, 0x108FA), (0x1091C, 0x1091E),
    (0x1093A, 0x1093E), (0x10940, 0x1097F), (0x109B8, 0x109BB), (0x109D0, 0x109D1),
    (0x10A04, 0x10A04), (0x10A07, 0x10A0B), (0x10A14, 0x10A14), (0x10A18, 0x10A18),
    (0x10A36, 0x10A37), (0x10A3B, 0x10A3E), (0x10A49, 0x10A4F), (0x10A59, 0x10A5F),
    (0x10AA0, 0x10ABF), (0x10AE7, 0x10AEA), (0x10AF7, 0x10AFF), (0x10B36, 0x10B38),
    (0x10B56, 0x10B57), (0x10B73, 0x10B77), (0x10B92, 0x10B98), (0x10B9D, 0x10BA8),
    (0x10BB0, 0x10BFF), (0x10C49, 0x10C7F), (0x10CB3, 0x10CBF), (0x10CF3, 0x10CF9),
    (0x10D28, 0x10D2F), (0x10D3A, 0x10E5F), (0x10E7F, 0x10E7F), (0x10EAA, 0x10EAA),
    (0x10EAE, 0x10EAF), (0x10EB2, 0x10EFF), (0x10F28, 0x10F2F), (0x10F5A, 0x10F6F),
    (0x10F8A, 0x10FAF), (0x10FCC, 0x10FDF), (0x10FF7, 0x10FFF), (0x1104E, 0x11051),
    (0x11076, 0x1107E), (0x110BD, 0x110BD), (0x110C3, 0x110CF), (0x110E9, 0x110EF),
    (0x110FA, 0x110FF), (0x11135, 0x11135), (0x11148, 0x1114F), (0x11177, 0x1117F),
    (0x111E0, 0x111E0), (0x111F5, 0x111FF), (0x11212, 0x11212), (0x1123F, 0x1127F),
    (0x11287, 0x11287), (0x11289, 0x11289), (0x1128E, 0x1128E), (0x1129E, 0x1129E),
    (0x112AA, 0x112AF), (0x112EB, 0x112EF), (0x112FA, 0x112FF), (0x11304, 0x11304),
    (0x1130D, 0x1130E), (0x11311, 0x11312), (0x11329, 0x11329), (0x11331, 0x11331),
    (0x11334, 0x11334), (0x1133A, 0x1133A), (0x11345, 0x11346), (0x11349, 0x1134A),
    (0x1134E, 0x1134F), (0x11351, 0x11356), (0x11358, 0x1135C), (0x11364, 0x11365),
    (0x1136D, 0x1136F), (0x11375, 0x113FF), (0x1145C, 0x1145C), (0x11462, 0x1147F),
    (0x114C8, 0x114CF), (0x114DA, 0x1157F), (0x115B6, 0x115B7), (0x115DE, 0x115FF),
    (0x11645, 0x1164F), (0x1165A, 0x1165F), (0x1166D, 0x1167F), (0x116BA, 0x116BF),
    (0x116CA, 0x116FF), (0x1171B, 0x1171C), (0x1172C, 0x1172F), (0x11747, 0x117FF),
    (0x1183C, 0x1189F), (0x118F3, 0x118FE), (0x11907, 0x11908), (0x1190A, 0x1190B),
    (0x11914, 0x11914), (0x11917, 0x11917), (0x11936, 0x11936), (0x11939, 0x1193A),
    (0x11947, 0x1194F), (0x1195A, 0x1199F), (0x119A8, 0x119A9), (0x119D8, 0x119D9),
    (0x119E5, 0x119FF), (0x11A48, 0x11A4F), (0x11AA3, 0x11AAF), (0x11AF9, 0x11BFF),
    (0x11C09, 0x11C09), (0x11C37, 0x11C37), (0x11C46, 0x11C4F), (0x11C6D, 0x11C6F),
    (0x11C90, 0x11C91), (0x11CA8, 0x11CA8), (0x11CB7, 0x11CFF), (0x11D07, 0x11D07),
    (0x11D0A, 0x11D0A), (0x11D37, 0x11D39), (0x11D3B, 0x11D3B), (0x11D3E, 0x11D3E),
    (0x11D48, 0x11D4F), (0x11D5A, 0x11D5F), (0x11D66, 0x11D66), (0x11D69, 0x11D69),
    (0x11D8F, 0x11D8F), (0x11D92, 0x11D92), (0x11D99, 0x11D9F), (0x11DAA, 0x11EDF),
    (0x11EF9, 0x11FAF), (0x11FB1, 0x11FBF), (0x11FF2, 0x11FFE), (0x1239A, 0x123FF),
    (0x1246F, 0x1246F), (0x12475, 0x1247F), (0x12544, 0x12F8F), (0x12FF3, 0x12FFF),
    (0x1342F, 0x143FF), (0x14647, 0x167FF), (0x16A39, 0x16A3F), (0x16A5F, 0x16A5F),
    (0x16A6A, 0x16A6D), (0x16ABF, 0x16ABF), (0x16ACA, 0x16ACF), (0x16AEE, 0x16AEF),
    (0x16AF6, 0x16AFF), (0x16B46, 0x16B4F), (0x16B5A, 0x16B5A), (0x16B62, 0x16B62),
    (0x16B78, 0x16B7C), (0x16B90, 0x16E3F), (0x16E9B, 0x16EFF), (0x16F4B, 0x16F4E),
    (0x16F88, 0x16F8E), (0x16FA0, 0x16FDF), (0x16FE5, 0x16FEF), (0x16FF2, 0x16FFF),
    (0x187F8, 0x187FF), (0x18CD6, 0x18CFF), (0x18D09, 0x1AFEF), (0x1AFF4, 0x1AFF4),
    (0x1AFFC, 0x1AFFC), (0x1AFFF, 0x1AFFF), (0x1B123, 0x1B14F), (0x1B153, 0x1B163),
    (0x1B168, 0x1B16F), (0x1B2FC, 0x1BBFF), (0x1BC6B, 0x1BC6F), (0x1BC7D, 0x1BC7F),
    (0x1BC89, 0x1BC8F), (0x1BC9A, 0x1BC9B), (0x1BCA0, 0x1CEFF), (0x1CF2E, 0x1CF2F),
    (0x1CF47, 0x1CF4F), (0x1CFC4, 0x1CFFF), (0x1D0F6, 0x1D0FF), (0x1D127, 0x1D128),
    (0x1D173, 0x1D17A), (0x1D1EB, 0x1D1FF), (0x1D246, 0x1D2DF), (0x1D2F4, 0x1D2FF),
    (0x1D357, 0x1D35F), (0x1D379, 0x1D3FF), (0x1D455, 0x1D455), (0x1D49D, 0x1D49D),
    (0x1D4A0, 0x1D4A1), (0x1D4A3, 0x1D4A4), (0x1D4A7, 0x1D4A8), (0x1D4AD, 0x1D4AD),
    (0x1D4BA, 0x1D4BA), (0x1D4BC, 0x1D4BC), (0x1D4C4, 0x1D4C4), (0x1D506, 0x1D506),
    (0x1D50B, 0x1D50C), (0x1D515, 0x1D515), (0x1D51D, 0x1D51D), (0x1D53A, 0x1D53A),
    (0x1D53F, 0x1D53F), (0x1D545, 0x1D545), (0x1D547, 0x1D549), (0x1D551, 0x1D551),
    (0x1D6A6, 0x1D6A7), (0x1D7CC, 0x1D7CD), (0x1DA8C, 0x1DA9A), (0x1DAA0, 0x1DAA0),
    (0x1DAB0, 0x1DEFF), (0x1DF1F, 0x1DFFF), (0x1E007, 0x1E007), (0x1E019, 0x1E01A),
    (0x1E022, 0x1E022), (0x1E025, 0x1E025), (0x1E02B, 0x1E0FF), (0x1E12D, 0x1E12F),
    (0x1E13E, 0x1E13F), (0x1E14A, 0x1E14D), (0x1E150, 0x1E28F), (0x1E2AF, 0x1E2BF),
    (0x1E2FA, 0x1E2FE), (0x1E300, 0x1E7DF), (0x1E7E7, 0x1E7E7), (0x1E7EC, 0x1E7EC),
    (0x1E7EF, 0x1E7EF), (0x1E7FF, 0x1E7FF), (0x1E8C5, 0x1E8C6), (0x1E8D7, 0x1E8FF),
    (0x1E94C, 0x1E94F), (0x1E95A, 0x1E95D), (0x1E960, 0x1EC70), (0x1ECB5, 0x1ED00),
    (0x1ED3E, 0x1EDFF), (0x1EE04, 0x1EE04), (0x1EE20, 0x1EE20), (0x1EE23, 0x1EE23),
    (0x1EE25, 0x1EE26), (0x1EE28, 0x1EE28), (0x1EE33, 0x1EE33), (0x1EE38, 0x1EE38),
    (0x1EE3A, 0x1EE3A), (0x1EE3C, 0x1EE41), (0x1EE43, 0x1EE46), (0x1EE48, 0x1EE48),
    (0x1EE4A, 0x1EE4A), (0x1EE4C, 0x1EE4C), (0x1EE50, 0x1EE50), (0x1EE53, 0x1EE53),
    (0x1EE55, 0x1EE56), (0x1EE58, 0x1EE58), (0x1EE5A, 0x1EE5A), (0x1EE5C, 0x1EE5C),
    (0x1EE5E, 0x1EE5E), (0x1EE60, 0x1EE60), (0x1EE63, 0x1EE63), (0x1EE65, 0x1EE66),
    (0x1EE6B, 0x1EE6B), (0x1EE73, 0x1EE73), (0x1EE78, 0x1EE78), (0x1EE7D, 0x1EE7D),
    (0x1EE7F, 0x1EE7F), (0x1EE8A, 0x1EE8A), (0x1EE9C, 0x1EEA0), (0x1EEA4, 0x1EEA4),
    (0x1EEAA, 0x1EEAA), (0x1EEBC, 0x1EEEF), (0x1EEF2, 0x1EFFF), (0x1F02C, 0x1F02F),
    (0x1F094, 0x1F09F), (0x1F0AF, 0x1F0B0), (0x1F0C0, 0x1F0C0), (0x1F0D0, 0x1F0D0),
    (0x1F0F6, 0x1F0FF), (0x1F1AE, 0x1F1E5), (0x1F203, 0x1F20F), (0x1F23C, 0x1F23F),
    (0x1F249, 0x1F24F), (0x1F252, 0x1F25F), (0x1F266, 0x1F2FF), (0x1F6D8, 0x1F6DC),
    (0x1F6ED, 0x1F6EF), (0x1F6FD, 0x1F6FF), (0x1F774, 0x1F77F), (0x1F7D9, 0x1F7DF),
    (0x1F7EC, 0x1F7EF), (0x1F7F1, 0x1F7FF), (0x1F80C, 0x1F80F), (0x1F848, 0x1F84F),
    (0x1F85A, 0x1F85F), (0x1F888, 0x1F88F), (0x1F8AE, 0x1F8AF), (0x1F8B2, 0x1F8FF),
    (0x1FA54, 0x1FA5F), (0x1FA6E, 0x1FA6F), (0x1FA75, 0x1FA77), (0x1FA7D, 0x1FA7F),
    (0x1FA87, 0x1FA8F), (0x1FAAD, 0x1FAAF), (0x1FABB, 0x1FABF), (0x1FAC6, 0x1FACF),
    (0x1FADA, 0x1FADF), (0x1FAE8, 0x1FAEF), (0x1FAF7, 0x1FAFF), (0x1FB93, 0x1FB93),
    (0x1FBCB, 0x1FBEF), (0x1FBFA, 0x1FFFF), (0x2A6E0, 0x2A6FF), (0x2B739, 0x2B73F),
    (0x2B81E, 0x2B81F), (0x2CEA2, 0x2CEAF), (0x2EBE1, 0x2F7FF), (0x2FA1E, 0x2FFFF),
    (0x3134B, 0xE00FF), (0xE01F0, 0x10FFFF),
];

/// Python's `str.isprintable()` of one character (`Py_UNICODE_ISPRINTABLE`, Unicode 14.0.0).
pub fn is_printable(c: char) -> bool {
    let cp = c as u32;
    NON_PRINTABLE
        .binary_search_by(|&(lo, hi)| {
            if hi < cp {
                std::cmp::Ordering::Less
            } else if lo > cp {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_err()
}

/// Python's `repr(s)` of a string (`unicode_repr` in `Objects/unicodeobject.c`): quoted with
/// `'` unless the string holds a `'` and no `"`; escapes `\\`, the chosen quote, `\t`, `\n`,
/// `\r`; other ASCII controls and DEL as `\xhh`; non-ASCII characters that are not printable
/// (see [`is_printable`]) as `\xhh`, `\uhhhh` or `\Uhhhhhhhh`; everything else as itself.
pub fn repr_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_repr_str(s, &mut out);
    out
}

fn write_repr_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            _ if c == quote => {
                out.push('\\');
                out.push(c);
            }
            _ if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            _ if c.is_ascii() || is_printable(c) => out.push(c),
            _ => {
                let cp = c as u32;
                if cp <= 0xff {
                    out.push_str(&format!("\\x{cp:02x}"));
                } else if cp <= 0xffff {
                    out.push_str(&format!("\\u{cp:04x}"));
                } else {
                    out.push_str(&format!("\\U{cp:08x}"));
                }
            }
        }
    }
    out.push(quote);
}

/// Python's `str.isspace()` of one character (`Py_UNICODE_ISSPACE`: bidirectional class WS, B
/// or S, or category Zs). Unlike Rust's `char::is_whitespace` it includes U+001C..U+001F.
pub fn is_py_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// Python's `s.strip()` (no argument): strips [`is_py_space`] characters from both ends.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Python's `len(s)`: the number of code points.
pub fn py_len(s: &str) -> usize {
    s.chars().count()
}

/// Python's `s[:n]` for `n >= 0`: the first `n` code points (all of `s` if it is shorter).
pub fn py_prefix(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

// ---------------------------------------------------------------------------------- floats

/// The decimal digits of a finite, non-negative double as CPython's `_Py_dg_dtoa` gives them:
/// `digits` without leading or trailing zeros (zero is the single digit `0`), and `decpt`, where
/// the value is `0.d1d2d3... * 10**decpt`.
struct Digits {
    digits: Vec<u8>,
    decpt: i32,
}

/// Reads Rust's `{:e}` form (`d.ddde-5`, `de7`).
fn parse_sci(s: &str) -> Digits {
    let (mantissa, exponent) = s.split_once('e').expect("Rust's {:e} has an exponent");
    let exponent: i32 = exponent
        .parse()
        .expect("Rust's {:e} exponent is an integer");
    let mut digits: Vec<u8> = mantissa.bytes().filter(|b| *b != b'.').collect();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    Digits {
        digits,
        decpt: exponent + 1,
    }
}

/// `_Py_dg_dtoa(x, 0, ...)`: the shortest digits that read back as `x` and, among those, the
/// nearest to `x`, ties to even. Rust's `{:e}` finds the same (shortest) length but breaks a tie
/// between two equally near candidates upwards (`1 + 2**-17` is `1.0000076293945313` in Rust,
/// `1.0000076293945312` in Python); Rust's exact formatting rounds half to even, so the
/// correctly rounded string of that length is taken wherever it reads back as `x`.
fn shortest_digits(x: f64) -> Digits {
    let shortest = parse_sci(&format!("{x:e}"));
    let n = shortest.digits.len();
    let nearest = format!("{:.*e}", n - 1, x);
    if nearest.parse::<f64>() == Ok(x) {
        parse_sci(&nearest)
    } else {
        shortest
    }
}

/// `_Py_dg_dtoa(x, 2, ndigits, ...)`: `x` correctly rounded (half to even, on its exact binary
/// value) to `ndigits >= 1` significant digits, trailing zeros dropped.
fn significant_digits(x: f64, ndigits: usize) -> Digits {
    parse_sci(&format!("{:.*e}", ndigits - 1, x))
}

/// Fixed notation of `d` (CPython's `format_float_short`): at least `min_frac` digits after the
/// point, and `.0` where there are none and `add_dot_0` is set.
fn layout_fixed(d: &Digits, min_frac: usize, add_dot_0: bool, out: &mut String) {
    let n = d.digits.len() as i32;
    let digits = std::str::from_utf8(&d.digits).expect("ASCII digits");
    let mut frac = String::new();
    if d.decpt <= 0 {
        out.push('0');
        frac.push_str(&"0".repeat((-d.decpt) as usize));
        frac.push_str(digits);
    } else if d.decpt >= n {
        out.push_str(digits);
        out.push_str(&"0".repeat((d.decpt - n) as usize));
    } else {
        out.push_str(&digits[..d.decpt as usize]);
        frac.push_str(&digits[d.decpt as usize..]);
    }
    while frac.len() < min_frac {
        frac.push('0');
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(&frac);
    } else if add_dot_0 {
        out.push_str(".0");
    }
}

/// Exponent notation of `d` (CPython's `format_float_short`): `d.ddd` with at least `min_frac`
/// digits after the point, then `e`, the exponent's sign and at least two exponent digits.
fn layout_exp(d: &Digits, min_frac: usize, upper: bool, out: &mut String) {
    let digits = std::str::from_utf8(&d.digits).expect("ASCII digits");
    out.push_str(&digits[..1]);
    let mut frac = digits[1..].to_owned();
    while frac.len() < min_frac {
        frac.push('0');
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(&frac);
    }
    let exp = d.decpt - 1;
    out.push(if upper { 'E' } else { 'e' });
    out.push(if exp < 0 { '-' } else { '+' });
    out.push_str(&format!("{:02}", exp.unsigned_abs()));
}

/// Python's `repr(x)` (and `str(x)`, f-string `{x}`) of a float: the shortest digits that read
/// back as `x` (nearest, ties to even), in fixed notation with at least one digit after the
/// point, or in exponent notation (`1e-05`, `1e+16`, `1.5e+20`) where the decimal exponent is
/// below -4 or at least 16; `inf`, `-inf`, `nan` (a NaN's sign is not shown), `-0.0`.
pub fn repr_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    let mut out = String::new();
    if x.is_sign_negative() {
        out.push('-');
    }
    if x.is_infinite() {
        out.push_str("inf");
        return out;
    }
    let d = shortest_digits(x.abs());
    if d.decpt <= -4 || d.decpt > 16 {
        layout_exp(&d, 0, false, &mut out);
    } else {
        layout_fixed(&d, 0, true, &mut out);
    }
    out
}

/// A format spec [`format_float`] does not take: Python's message where Python refuses it too,
/// else a note that the spec is valid Python but outside what this port supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatSpecError(pub String);

impl fmt::Display for FormatSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatSpecError {}

/// The largest precision [`format_float`] takes (Rust's formatter limits precision; Python's
/// limit is far higher, and no message of the core comes near either).
pub const MAX_PRECISION: usize = 10_000;

/// Python's `format(x, spec)` (f-string `{x:spec}`) of a float, for specs of the form
/// `[sign][.precision][type]`: sign `+`, `-` or ` `; type `f`/`F` (fixed, default precision 6),
/// `e`/`E` (exponent, default 6), `g`/`G` (general, default 6, precision 0 taken as 1, trailing
/// zeros removed, exponent where the exponent is below -4 or at least the precision), `%` (times
/// 100, fixed, then `%`), or none (`str(x)`; with a precision, `g` that keeps a `.0`).
///
/// Digits are correctly rounded half to even on the exact binary value (`format(0.125, '.2f')`
/// is `0.12`), as CPython's `PyOS_double_to_string`. Infinities and NaN print `inf`/`nan`
/// (`INF`/`NAN` for upper-case types), a NaN without its sign, `-0.0` with its sign.
///
/// Not taken (a [`FormatSpecError`]): fill, alignment, width, `z`, `#`, `0`, grouping (`,`/`_`),
/// the locale type `n`, and precisions above [`MAX_PRECISION`]; none is used by the core.
pub fn format_float(x: f64, spec: &str) -> Result<String, FormatSpecError> {
    let unsupported = || {
        FormatSpecError(format!(
            "format spec {} is outside what value::format_float supports",
            repr_str(spec)
        ))
    };
    let mut rest = spec;
    let mut sign = '-';
    if let Some(c @ ('+' | '-' | ' ')) = rest.chars().next() {
        sign = c;
        rest = &rest[1..];
    }
    let mut precision: Option<usize> = None;
    if let Some(after) = rest.strip_prefix('.') {
        let n = after.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return Err(FormatSpecError(
                "Format specifier missing precision".to_owned(),
            ));
        }
        let p: usize = after[..n].parse().map_err(|_| unsupported())?;
        if p > MAX_PRECISION {
            return Err(unsupported());
        }
        precision = Some(p);
        rest = &after[n..];
    }
    let kind = match rest {
        "" => None,
        "f" | "F" | "e" | "E" | "g" | "G" | "%" => rest.chars().next(),
        _ => {
            let mut chars = rest.chars();
            return match (chars.next(), chars.next()) {
                // a type Python rejects for floats (any one character that is not an alignment,
                // a flag, a width, a grouping or `n`), in `unknown_presentation_type`'s words
                (Some(c), None) if !"<>=^,_#zn0123456789".contains(c) => {
                    Err(FormatSpecError(if (33..128).contains(&(c as u32)) {
                        format!("Unknown format code '{c}' for object of type 'float'")
                    } else {
                        format!(
                            "Unknown format code '\\x{:x}' for object of type 'float'",
                            c as u32
                        )
                    }))
                }
                // fill, alignment, width, flags, grouping, 'n': valid Python, not taken here
                _ => Err(unsupported()),
            };
        }
    };
    let upper = matches!(kind, Some('F' | 'E' | 'G'));
    let mut out = String::new();
    let x = if kind == Some('%') { x * 100.0 } else { x };
    if x.is_sign_negative() && !x.is_nan() {
        out.push('-');
    } else if sign != '-' {
        out.push(sign);
    }
    if !x.is_finite() {
        let word = if x.is_nan() { "nan" } else { "inf" };
        out.push_str(&if upper {
            word.to_uppercase()
        } else {
            word.to_owned()
        });
        if kind == Some('%') {
            out.push('%');
        }
        return Ok(out);
    }
    let a = x.abs();
    match kind {
        None if precision.is_none() => {
            let d = shortest_digits(a);
            if d.decpt <= -4 || d.decpt > 16 {
                layout_exp(&d, 0, false, &mut out);
            } else {
                layout_fixed(&d, 0, true, &mut out);
            }
        }
        Some('f' | 'F' | '%') => {
            out.push_str(&format!("{:.*}", precision.unwrap_or(6), a));
            if kind == Some('%') {
                out.push('%');
            }
        }
        Some('e' | 'E') => {
            let p = precision.unwrap_or(6);
            let d = significant_digits(a, p + 1);
            layout_exp(&d, p, upper, &mut out);
        }
        _ => {
            // 'g'/'G', or no type with a precision ('g' that keeps a '.0', and switches to the
            // exponent one digit earlier: CPython's `add_dot_0_if_integer ? precision-1 : precision`)
            let add_dot_0 = kind.is_none();
            let p = precision.unwrap_or(6).max(1);
            let d = significant_digits(a, p);
            let limit = if add_dot_0 { p as i32 - 1 } else { p as i32 };
            if d.decpt <= -4 || d.decpt > limit {
                layout_exp(&d, 0, upper, &mut out);
            } else {
                layout_fixed(&d, 0, add_dot_0, &mut out);
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------- rounding

/// `round(x, ndigits)` gave a value too large for a float (only possible for `ndigits < 0`):
/// Python raises `OverflowError: rounded value too large to represent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundOverflow;

impl fmt::Display for RoundOverflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("rounded value too large to represent")
    }
}

impl std::error::Error for RoundOverflow {}

/// CPython's `NDIGITS_MAX`, `(DBL_MANT_DIG - DBL_MIN_EXP) * 0.30103`: from here on `x` rounds to
/// itself.
const NDIGITS_MAX: i32 = 323;
/// CPython's `NDIGITS_MIN`, `-(DBL_MAX_EXP + 1) * 0.30103`: below it `x` rounds to a signed zero.
const NDIGITS_MIN: i32 = -308;

/// Python's `round(x, ndigits)` of a float (`float.__round__` / `double_round` in
/// `Objects/floatobject.c`): `x` correctly rounded, half to even on its exact binary value, to
/// `ndigits` decimal places (a negative `ndigits` rounds to tens, hundreds, ...), read back as
/// the nearest float. The sign survives (`round(-0.001, 2)` is `-0.0`); infinities, NaN and
/// zeros are returned as they are.
///
/// For `ndigits >= 0` the result is always finite; the overflow Python raises for a negative
/// `ndigits` (`round(1.7976931348623157e308, -308)`) is returned here as an infinity of `x`'s
/// sign (see [`checked_py_round`] for Python's error).
pub fn py_round(x: f64, ndigits: i32) -> f64 {
    match checked_py_round(x, ndigits) {
        Ok(r) => r,
        Err(RoundOverflow) => f64::INFINITY.copysign(x),
    }
}

/// [`py_round`], with Python's `OverflowError` as [`RoundOverflow`].
pub fn checked_py_round(x: f64, ndigits: i32) -> Result<f64, RoundOverflow> {
    if !x.is_finite() || ndigits > NDIGITS_MAX {
        return Ok(x);
    }
    if ndigits < NDIGITS_MIN {
        return Ok(0.0 * x);
    }
    let text = if ndigits >= 0 {
        // Rust's fixed formatting is correctly rounded, ties to even, like dtoa's mode 3
        format!("{:.*}", ndigits as usize, x)
    } else {
        round_integer_digits(x, (-ndigits) as usize)
    };
    let rounded: f64 = text.parse().expect("a decimal numeral");
    if rounded.is_infinite() {
        return Err(RoundOverflow);
    }
    Ok(rounded)
}

/// `x` rounded to a multiple of `10**k` (`k >= 1`), half to even on the exact value, as a decimal
/// numeral with its sign.
fn round_integer_digits(x: f64, k: usize) -> String {
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let a = x.abs();
    let whole = a.trunc(); // exact; `a - whole` is exact too
    let fraction_nonzero = a != whole;
    let digits = format!("{whole:.0}").into_bytes(); // the exact integer
    if whole == 0.0 || k > digits.len() {
        // |x| < 10**(k-1) < 10**k / 2: rounds to zero
        return format!("{sign}0");
    }
    let cut = digits.len() - k;
    let (head, tail) = digits.split_at(cut);
    let up = match tail[0].cmp(&b'5') {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => {
            let beyond = fraction_nonzero || tail[1..].iter().any(|&d| d != b'0');
            beyond || head.last().is_some_and(|&d| (d - b'0') % 2 == 1)
        }
    };
    let mut head = head.to_vec();
    if up {
        let mut i = head.len();
        loop {
            if i == 0 {
                head.insert(0, b'1');
                break;
            }
            i -= 1;
            if head[i] == b'9' {
                head[i] = b'0';
            } else {
                head[i] += 1;
                break;
            }
        }
    }
    if head.is_empty() {
        return format!("{sign}0");
    }
    format!(
        "{sign}{}{}",
        String::from_utf8(head).expect("ASCII digits"),
        "0".repeat(k)
    )
}

// ---------------------------------------------------------------------------------- sums

/// Why `math.fsum` raised: `OverflowError: intermediate overflow in fsum` (finite summands whose
/// partial sums overflow) or `ValueError: -inf + inf in fsum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsumError {
    /// `OverflowError("intermediate overflow in fsum")`.
    IntermediateOverflow,
    /// `ValueError("-inf + inf in fsum")`.
    InfMinusInf,
}

impl fmt::Display for FsumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FsumError::IntermediateOverflow => "intermediate overflow in fsum",
            FsumError::InfMinusInf => "-inf + inf in fsum",
        })
    }
}

impl std::error::Error for FsumError {}

/// Python 3.11's `math.fsum(xs)` (`math_fsum` in `Modules/mathmodule.c`): Shewchuk's exact
/// partials, summed from the top with CPython's half-even correction across partials. An empty
/// sum, and a sum of zeros (`-0.0` included: 3.12 changed this), is `0.0`; an infinity or NaN
/// summand gives their IEEE sum.
pub fn try_fsum(xs: &[f64]) -> Result<f64, FsumError> {
    let mut partials: Vec<f64> = Vec::new();
    let mut special_sum = 0.0_f64;
    let mut inf_sum = 0.0_f64;
    for &item in xs {
        let mut x = item;
        let xsave = x;
        let mut i = 0;
        for j in 0..partials.len() {
            let mut y = partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let yr = hi - x;
            let lo = y - yr;
            if lo != 0.0 {
                partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        partials.truncate(i);
        if x != 0.0 {
            if !x.is_finite() {
                // a nonfinite x comes from an intermediate overflow or an inf/nan summand
                if xsave.is_finite() {
                    return Err(FsumError::IntermediateOverflow);
                }
                if xsave.is_infinite() {
                    inf_sum += xsave;
                }
                special_sum += xsave;
                partials.clear();
            } else {
                partials.push(x);
            }
        }
    }
    if special_sum != 0.0 {
        // (a NaN's special_sum is NaN, which is != 0.0: returned as is, as in CPython)
        return if inf_sum.is_nan() {
            Err(FsumError::InfMinusInf)
        } else {
            Ok(special_sum)
        };
    }
    let mut n = partials.len();
    let mut hi = 0.0_f64;
    if n > 0 {
        n -= 1;
        hi = partials[n];
        let mut lo = 0.0_f64;
        // sum_exact(ps, hi) from the top, stop when the sum becomes inexact
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = partials[n];
            hi = x + y;
            let yr = hi - x;
            lo = y - yr;
            if lo != 0.0 {
                break;
            }
        }
        // make half-even rounding work across multiple partials
        if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            let yr = x - hi;
            if y == yr {
                hi = x;
            }
        }
    }
    Ok(hi)
}

/// [`try_fsum`] without Python's errors: an intermediate overflow gives the IEEE sum of the
/// summands (an infinity), `-inf + inf` gives NaN. For finite sums it is `math.fsum` exactly.
pub fn fsum(xs: &[f64]) -> f64 {
    match try_fsum(xs) {
        Ok(s) => s,
        Err(FsumError::IntermediateOverflow) => xs.iter().fold(0.0, |a, b| a + b),
        Err(FsumError::InfMinusInf) => f64::NAN,
    }
}

/// The core's `ordered_sum(xs)` (`gpu_arena/core/sums.py`): `0.0 + xs[0] + xs[1] + ...`, left to
/// right (so `[-0.0]` gives `0.0` and `[]` gives `0.0`). It is also Python 3.11's built-in `sum` of
/// floats (`builtin_sum_impl` in `Python/bltinmodule.c`: plain `f_result += x`); 3.12's built-in
/// `sum` adds compensation (Neumaier), which is why the core does not call it on floats.
pub fn ordered_sum(xs: &[f64]) -> f64 {
    let mut total = 0.0_f64;
    for &x in xs {
        total += x;
    }
    total
}

// ---------------------------------------------------------------------------------- floor division

/// Python's error from `//`, `%` or `divmod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithError {
    /// `ZeroDivisionError` with Python 3.11's message.
    ZeroDivision(&'static str),
    /// An `i64` result Python would give as a larger int (`-2**63 // -1`).
    Overflow,
}

impl fmt::Display for ArithError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArithError::ZeroDivision(msg) => f.write_str(msg),
            ArithError::Overflow => f.write_str("integer result outside i64"),
        }
    }
}

impl std::error::Error for ArithError {}

/// CPython's `_float_div_mod`: `(a // b, a % b)` for `b != 0`: the remainder takes the divisor's
/// sign (a zero remainder too), the quotient is snapped to the nearest integral value.
fn float_div_mod(vx: f64, wx: f64) -> (f64, f64) {
    let mut m = vx % wx; // C's fmod
    let mut div = (vx - m) / wx;
    if m != 0.0 {
        if (wx < 0.0) != (m < 0.0) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = 0.0_f64.copysign(wx);
    }
    let floordiv = if div != 0.0 {
        let mut f = div.floor();
        if div - f > 0.5 {
            f += 1.0;
        }
        f
    } else {
        0.0_f64.copysign(vx / wx)
    };
    (floordiv, m)
}

/// Python's `a // b` of floats (`float_floor_div`).
pub fn py_floordiv_f64(a: f64, b: f64) -> Result<f64, ArithError> {
    if b == 0.0 {
        return Err(ArithError::ZeroDivision("float floor division by zero"));
    }
    Ok(float_div_mod(a, b).0)
}

/// Python's `a % b` of floats (`float_rem`): the result has the sign of `b`.
pub fn py_mod_f64(a: f64, b: f64) -> Result<f64, ArithError> {
    if b == 0.0 {
        return Err(ArithError::ZeroDivision("float modulo"));
    }
    let mut m = a % b;
    if m != 0.0 {
        if (b < 0.0) != (m < 0.0) {
            m += b;
        }
    } else {
        m = 0.0_f64.copysign(b);
    }
    Ok(m)
}

/// Python's `divmod(a, b)` of floats (`float_divmod`).
pub fn py_divmod_f64(a: f64, b: f64) -> Result<(f64, f64), ArithError> {
    if b == 0.0 {
        return Err(ArithError::ZeroDivision("float divmod()"));
    }
    Ok(float_div_mod(a, b))
}

/// Python's `a // b` of ints: the floor of the quotient (`-7 // 2 == -4`).
pub fn py_floordiv_i64(a: i64, b: i64) -> Result<i64, ArithError> {
    if b == 0 {
        return Err(ArithError::ZeroDivision(
            "integer division or modulo by zero",
        ));
    }
    let q = a.checked_div(b).ok_or(ArithError::Overflow)?;
    if a % b != 0 && ((a % b < 0) != (b < 0)) {
        Ok(q - 1)
    } else {
        Ok(q)
    }
}

/// Python's `a % b` of ints: the remainder with the sign of `b` (`-7 % 2 == 1`).
pub fn py_mod_i64(a: i64, b: i64) -> Result<i64, ArithError> {
    if b == 0 {
        return Err(ArithError::ZeroDivision("integer modulo by zero"));
    }
    // i64::MIN % -1 overflows in Rust; the remainder is 0
    let r = a.checked_rem(b).unwrap_or(0);
    if r != 0 && ((r < 0) != (b < 0)) {
        Ok(r + b)
    } else {
        Ok(r)
    }
}

// ---------------------------------------------------------------------------------- Python-facing tests

fn arith_err(e: ArithError) -> PyErr {
    match e {
        ArithError::ZeroDivision(msg) => PyZeroDivisionError::new_err(msg),
        ArithError::Overflow => PyOverflowError::new_err("integer result outside i64"),
    }
}

/// `repr(obj)`, read as a [`PyValue`].
#[pyfunction]
fn value_repr(obj: PyValue) -> String {
    obj.repr()
}

/// `str(obj)`, read as a [`PyValue`].
#[pyfunction]
fn value_str(obj: PyValue) -> String {
    obj.str()
}

/// `obj` read as a [`PyValue`] and written back (`FromPyObject` then `IntoPy`).
#[pyfunction]
fn value_roundtrip(py: Python<'_>, obj: PyValue) -> PyResult<PyObject> {
    obj.try_into_py(py)
}

/// `format(x, spec)` of a float ([`format_float`]); `ValueError` for a spec it does not take.
#[pyfunction]
fn value_format(x: f64, spec: &str) -> PyResult<String> {
    format_float(x, spec).map_err(|e| PyValueError::new_err(e.0))
}

/// `round(x, ndigits)` of a float ([`checked_py_round`]); `OverflowError` as Python raises it.
#[pyfunction]
fn value_round(x: f64, ndigits: i64) -> PyResult<f64> {
    // beyond NDIGITS_MAX / NDIGITS_MIN the result no longer depends on ndigits
    let n = ndigits.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    checked_py_round(x, n).map_err(|e| PyOverflowError::new_err(e.to_string()))
}

/// `math.fsum(xs)` ([`try_fsum`]), with Python's `OverflowError` / `ValueError`.
#[pyfunction]
fn value_fsum(xs: Vec<f64>) -> PyResult<f64> {
    try_fsum(&xs).map_err(|e| match e {
        FsumError::IntermediateOverflow => PyOverflowError::new_err(e.to_string()),
        FsumError::InfMinusInf => PyValueError::new_err(e.to_string()),
    })
}

/// `ordered_sum(xs)` of floats ([`ordered_sum`]).
#[pyfunction]
fn value_ordered_sum(xs: Vec<f64>) -> f64 {
    ordered_sum(&xs)
}

/// `a // b`: of two ints ([`py_floordiv_i64`]) where both are ints, else of floats.
#[pyfunction]
fn value_floordiv(py: Python<'_>, a: PyValue, b: PyValue) -> PyResult<PyObject> {
    binary_floor(py, a, b, py_floordiv_i64, py_floordiv_f64)
}

/// `a % b`: of two ints ([`py_mod_i64`]) where both are ints, else of floats.
#[pyfunction]
fn value_mod(py: Python<'_>, a: PyValue, b: PyValue) -> PyResult<PyObject> {
    binary_floor(py, a, b, py_mod_i64, py_mod_f64)
}

/// `divmod(a, b)` of floats ([`py_divmod_f64`]).
#[pyfunction]
fn value_divmod(a: f64, b: f64) -> PyResult<(f64, f64)> {
    py_divmod_f64(a, b).map_err(arith_err)
}

fn binary_floor(
    py: Python<'_>,
    a: PyValue,
    b: PyValue,
    int_op: fn(i64, i64) -> Result<i64, ArithError>,
    float_op: fn(f64, f64) -> Result<f64, ArithError>,
) -> PyResult<PyObject> {
    let as_float = |v: &PyValue| match *v {
        PyValue::Int(i) => Ok(i as f64),
        PyValue::Float(x) => Ok(x),
        _ => Err(pyo3::exceptions::PyTypeError::new_err(
            "expected an int or a float",
        )),
    };
    match (&a, &b) {
        (PyValue::Int(x), PyValue::Int(y)) => Ok(int_op(*x, *y).map_err(arith_err)?.into_py(py)),
        _ => Ok(float_op(as_float(&a)?, as_float(&b)?)
            .map_err(arith_err)?
            .into_py(py)),
    }
}

/// `s.strip()` ([`py_strip`]).
#[pyfunction]
fn value_strip(s: &str) -> &str {
    py_strip(s)
}

/// `(len(s), s[:n])` ([`py_len`], [`py_prefix`]).
#[pyfunction]
fn value_prefix(s: &str, n: usize) -> (usize, &str) {
    (py_len(s), py_prefix(s, n))
}

/// Registers the `value_*` test functions on the engine's module.
pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(value_repr, m)?)?;
    m.add_function(wrap_pyfunction!(value_str, m)?)?;
    m.add_function(wrap_pyfunction!(value_roundtrip, m)?)?;
    m.add_function(wrap_pyfunction!(value_format, m)?)?;
    m.add_function(wrap_pyfunction!(value_round, m)?)?;
    m.add_function(wrap_pyfunction!(value_fsum, m)?)?;
    m.add_function(wrap_pyfunction!(value_ordered_sum, m)?)?;
    m.add_function(wrap_pyfunction!(value_floordiv, m)?)?;
    m.add_function(wrap_pyfunction!(value_mod, m)?)?;
    m.add_function(wrap_pyfunction!(value_divmod, m)?)?;
    m.add_function(wrap_pyfunction!(value_strip, m)?)?;
    m.add_function(wrap_pyfunction!(value_prefix, m)?)?;
    Ok(())
}
