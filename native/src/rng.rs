//! CPython 3.11's `random.Random`, bit for bit: the Mersenne Twister of `Modules/_randommodule.c`
//! (`genrand_uint32`, `init_genrand`, `init_by_array`, `random_seed`, `getrandbits`, `getstate`,
//! `setstate`) and the Python-level methods of `Lib/random.py` built on it (`_randbelow`,
//! `randrange`, `randint`, `choice`, `shuffle`, `sample`, `choices`, `uniform`, `gauss`).
//!
//! [`PyRandom`] is the pure Rust generator the engine draws from; [`RandomPy`] wraps it as the
//! Python class `gpu_arena_rs.Random` so the tests can compare it with `random.Random` call by
//! call. A state taken with Python's `Random.getstate()` can be loaded here
//! ([`PyRandom::from_py_state`]) and this generator's state handed back
//! ([`PyRandom::to_py_state`]), so a stream may change sides midway.
//!
//! Floating-point results depend only on IEEE arithmetic, except `gauss` (and `sample`'s set-size
//! heuristic) which call the platform's `log`/`cos`/`sin`, as CPython does: on the same libm they
//! agree bit for bit.

use std::collections::HashSet;
use std::fmt;

use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyFloat, PyList, PyLong, PyString, PyTuple};

/// Degree of recurrence of MT19937 (`N` in `_randommodule.c`): words of state.
pub const N: usize = 624;
/// Middle word offset (`M` in `_randommodule.c`).
const M: usize = 397;
/// Constant vector a (`MATRIX_A`).
const MATRIX_A: u32 = 0x9908_b0df;
/// Most significant w-r bits (`UPPER_MASK`).
const UPPER_MASK: u32 = 0x8000_0000;
/// Least significant r bits (`LOWER_MASK`).
const LOWER_MASK: u32 = 0x7fff_ffff;
/// `random.TWOPI`.
const TWOPI: f64 = 2.0 * std::f64::consts::PI;
/// The version `Random.getstate()` writes (`Random.VERSION`).
pub const STATE_VERSION: i64 = 3;

/// An error of a `random.Random` method, named by the Python exception it raises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RandError {
    /// `ValueError(message)`
    Value(String),
    /// `IndexError(message)`
    Index(String),
    /// `TypeError(message)`
    Type(String),
}

impl fmt::Display for RandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RandError::Value(m) => write!(f, "ValueError: {m}"),
            RandError::Index(m) => write!(f, "IndexError: {m}"),
            RandError::Type(m) => write!(f, "TypeError: {m}"),
        }
    }
}

impl std::error::Error for RandError {}

impl From<RandError> for PyErr {
    fn from(e: RandError) -> PyErr {
        match e {
            RandError::Value(m) => PyValueError::new_err(m),
            RandError::Index(m) => PyIndexError::new_err(m),
            RandError::Type(m) => PyTypeError::new_err(m),
        }
    }
}

fn value_error<T>(message: impl Into<String>) -> Result<T, RandError> {
    Err(RandError::Value(message.into()))
}

/// The weights of [`PyRandom::choices_indices`]: `choices(..., weights=...)` or
/// `choices(..., cum_weights=...)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Weights<'a> {
    /// No weights: every index equally likely.
    None,
    /// Relative weights, accumulated left to right (`itertools.accumulate`).
    Relative(&'a [f64]),
    /// Cumulative weights.
    Cumulative(&'a [f64]),
}

/// The state of a generator, as `random.Random.getstate()` holds it:
/// `(3, (*mt, index), gauss_next)`.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomState {
    /// The 624 words of the twister.
    pub mt: [u32; N],
    /// The position of the next word to temper (624: regenerate first).
    pub index: usize,
    /// `Random.gauss_next`: the second normal deviate `gauss` keeps for its next call.
    pub gauss_next: Option<f64>,
}

/// `random.Random` of CPython 3.11: MT19937 and the Python-level methods on it.
#[derive(Clone, Debug, PartialEq)]
pub struct PyRandom {
    mt: [u32; N],
    index: usize,
    gauss_next: Option<f64>,
}

/// Little-endian 32-bit words of `magnitude` (at least one word; `0` gives `[0]`), as
/// `random_seed` splits the absolute value of an int seed.
fn u64_words(magnitude: u64) -> Vec<u32> {
    if magnitude >> 32 == 0 {
        vec![magnitude as u32]
    } else {
        vec![magnitude as u32, (magnitude >> 32) as u32]
    }
}

/// Python's floor division `a // b` (`b != 0`).
fn floor_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// `bisect.bisect_right(a, x, lo, hi)`: the insertion point after any entries equal to `x`.
fn bisect_right<T: PartialOrd>(a: &[T], x: &T, mut lo: usize, mut hi: usize) -> usize {
    while lo < hi {
        let mid = (lo + hi) / 2;
        if *x < a[mid] {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

impl PyRandom {
    /// `random.Random(seed)` for an int seed that fits an `i64` (`random_seed`: the absolute
    /// value's 32-bit words, least significant first, through `init_by_array`).
    pub fn new(seed: i64) -> Self {
        Self::from_seed_words(&u64_words(seed.unsigned_abs()))
    }

    /// `random.Random(seed)` for an int seed of any size, given as the little-endian 32-bit words
    /// of its absolute value (the sign is dropped, as `random_seed` does). Leading zero words are
    /// ignored; no words means seed 0.
    pub fn from_seed_words(words: &[u32]) -> Self {
        let used = words.iter().rposition(|&w| w != 0).map_or(1, |i| i + 1);
        let key: Vec<u32> = if words.is_empty() { vec![0] } else { words[..used].to_vec() };
        let mut r = PyRandom { mt: [0; N], index: N + 1, gauss_next: None };
        r.init_by_array(&key);
        r
    }

    /// `random.Random(seed)` for an int seed of any size, given as the little-endian bytes of its
    /// absolute value.
    pub fn from_seed_le_bytes(bytes: &[u8]) -> Self {
        let words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| c.iter().rev().fold(0u32, |acc, &b| (acc << 8) | u32::from(b)))
            .collect();
        Self::from_seed_words(&words)
    }

    /// `Random.seed(seed)` for an `i64` seed: restarts the stream (and forgets `gauss_next`).
    pub fn seed(&mut self, seed: i64) {
        *self = Self::new(seed);
    }

    /// `init_genrand`: initializes the state with a 32-bit seed.
    fn init_genrand(&mut self, s: u32) {
        self.mt[0] = s;
        for i in 1..N {
            let prev = self.mt[i - 1];
            self.mt[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        self.index = N;
    }

    /// `init_by_array`: initializes the state from a key of 32-bit words.
    fn init_by_array(&mut self, key: &[u32]) {
        self.init_genrand(19_650_218);
        let mt = &mut self.mt;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1];
            mt[i] = (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1];
            mt[i] = (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
    }

    /// `random_setstate` (with `Random.setstate`'s version 3): a generator continuing from
    /// `state`. `ValueError("invalid state")` where the index is past 624, as CPython.
    pub fn from_state(state: &RandomState) -> Result<Self, RandError> {
        if state.index > N {
            return value_error("invalid state");
        }
        Ok(PyRandom { mt: state.mt, index: state.index, gauss_next: state.gauss_next })
    }

    /// `Random.getstate()`: the words, the index and `gauss_next`.
    pub fn state(&self) -> RandomState {
        RandomState { mt: self.mt, index: self.index, gauss_next: self.gauss_next }
    }

    /// `Random.setstate(state)` from the object `random.Random.getstate()` returns: version 3
    /// (`(3, (*624 words, index), gauss_next)`) or version 2 (words reduced modulo 2**32), with
    /// CPython's exceptions.
    pub fn from_py_state(state: &PyAny) -> PyResult<Self> {
        let parts: &PyTuple = state.downcast()?;
        if parts.len() != 3 {
            return Err(PyValueError::new_err(format!(
                "state must be a (version, internalstate, gauss_next) tuple, got {} items",
                parts.len()
            )));
        }
        let version: &PyAny = parts.get_item(0)?;
        let internal: &PyAny = parts.get_item(1)?;
        let gauss_next: Option<f64> = parts.get_item(2)?.extract()?;
        let words: Vec<&PyAny> = match version.extract::<i64>() {
            Ok(3) => {
                let t: &PyTuple = internal
                    .downcast()
                    .map_err(|_| PyTypeError::new_err("state vector must be a tuple"))?;
                t.iter().collect()
            }
            Ok(2) => {
                let modulus = 1u64 << 32;
                internal
                    .iter()?
                    .map(|x| x?.call_method1("__mod__", (modulus,)))
                    .collect::<PyResult<Vec<_>>>()?
            }
            _ => {
                return Err(PyValueError::new_err(format!(
                    "state with version {} passed to Random.setstate() of version {STATE_VERSION}",
                    version.str()?
                )))
            }
        };
        if words.len() != N + 1 {
            return Err(PyValueError::new_err("state vector is the wrong size"));
        }
        let mut mt = [0u32; N];
        for (slot, w) in mt.iter_mut().zip(&words) {
            // PyLong_AsUnsignedLong, then the cast to uint32_t
            *slot = w.extract::<u64>()? as u32;
        }
        let index: i64 = words[N].extract()?;
        if !(0..=N as i64).contains(&index) {
            return Err(PyValueError::new_err("invalid state"));
        }
        Ok(PyRandom { mt, index: index as usize, gauss_next })
    }

    /// `Random.getstate()` as the Python object: `(3, (*624 words, index), gauss_next)`.
    pub fn to_py_state(&self, py: Python) -> PyResult<PyObject> {
        let mut items: Vec<PyObject> = self.mt.iter().map(|w| w.to_object(py)).collect();
        items.push(self.index.to_object(py));
        let internal = PyTuple::new(py, items);
        Ok((STATE_VERSION, internal, self.gauss_next).to_object(py))
    }

    /// `genrand_uint32`: the next tempered 32-bit word (regenerating the 624 words when spent).
    pub fn genrand_uint32(&mut self) -> u32 {
        const MAG01: [u32; 2] = [0, MATRIX_A];
        if self.index >= N {
            let mt = &mut self.mt;
            for kk in 0..N - M {
                let y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
                mt[kk] = mt[kk + M] ^ (y >> 1) ^ MAG01[(y & 1) as usize];
            }
            for kk in N - M..N - 1 {
                let y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
                mt[kk] = mt[kk + M - N] ^ (y >> 1) ^ MAG01[(y & 1) as usize];
            }
            let y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
            mt[N - 1] = mt[M - 1] ^ (y >> 1) ^ MAG01[(y & 1) as usize];
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `Random.random()` (`random_random`, genrand_res53): a float in [0, 1) with 53 random bits.
    pub fn random(&mut self) -> f64 {
        let a = self.genrand_uint32() >> 5;
        let b = self.genrand_uint32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `Random.getrandbits(k)` for `k <= 64`: a `k`-bit int (0 draws nothing; up to 32 bits one
    /// word's top bits; more, the words least significant first, the last one's top bits).
    ///
    /// # Panics
    /// If `k > 64` (use [`PyRandom::getrandbits_words`]).
    pub fn getrandbits(&mut self, k: u32) -> u64 {
        assert!(k <= 64, "getrandbits: {k} bits do not fit a u64");
        match k {
            0 => 0,
            1..=32 => u64::from(self.genrand_uint32() >> (32 - k)),
            _ => {
                let low = u64::from(self.genrand_uint32());
                let high = u64::from(self.genrand_uint32() >> (64 - k));
                low | (high << 32)
            }
        }
    }

    /// `Random.getrandbits(k)` for any `k`: the result's little-endian 32-bit words
    /// (`ceil(k / 32)` of them; none for `k == 0`).
    pub fn getrandbits_words(&mut self, k: u64) -> Vec<u32> {
        if k == 0 {
            return Vec::new();
        }
        if k <= 32 {
            return vec![self.genrand_uint32() >> (32 - k)];
        }
        let words = (k - 1) / 32 + 1;
        let mut left = k;
        let mut out = Vec::with_capacity(words as usize);
        for _ in 0..words {
            let mut r = self.genrand_uint32();
            if left < 32 {
                r >>= 32 - left;
            }
            out.push(r);
            left = left.saturating_sub(32);
        }
        out
    }

    /// `Random._randbelow_with_getrandbits(n)`: an int in [0, n), by rejection on
    /// `getrandbits(n.bit_length())`.
    ///
    /// # Panics
    /// If `n == 0` (CPython's loop never ends there).
    pub fn randbelow(&mut self, n: u64) -> u64 {
        assert!(n > 0, "randbelow(0) is undefined");
        let k = 64 - n.leading_zeros();
        let mut r = self.getrandbits(k);
        while r >= n {
            r = self.getrandbits(k);
        }
        r
    }

    /// `Random.getrandbits(k)` for `k <= 128`.
    ///
    /// # Panics
    /// If `k > 128`.
    pub fn getrandbits_u128(&mut self, k: u32) -> u128 {
        assert!(k <= 128, "getrandbits: {k} bits do not fit a u128");
        let words = self.getrandbits_words(u64::from(k));
        words.iter().rev().fold(0u128, |acc, &w| (acc << 32) | u128::from(w))
    }

    /// `Random._randbelow_with_getrandbits(n)` for `n` up to 2**128 - 1 (`randint(-2**63, 2**63 - 1)`
    /// needs 2**64).
    ///
    /// # Panics
    /// If `n == 0`.
    pub fn randbelow_u128(&mut self, n: u128) -> u128 {
        assert!(n > 0, "randbelow(0) is undefined");
        let k = 128 - n.leading_zeros();
        let mut r = self.getrandbits_u128(k);
        while r >= n {
            r = self.getrandbits_u128(k);
        }
        r
    }

    /// `Random.randrange(start, stop, step)` on integers (`i128` so `randint`'s `b + 1` cannot
    /// overflow); the result lies in the range, so it fits an `i64`.
    fn randrange_i128(&mut self, start: i128, stop: i128, step: i128) -> Result<i64, RandError> {
        let width = stop - start;
        if step == 1 {
            if width > 0 {
                let r = self.randbelow_u128(width as u128);
                return Ok((start + r as i128) as i64);
            }
            return value_error(format!("empty range for randrange() ({start}, {stop}, {width})"));
        }
        let n = match step {
            s if s > 0 => floor_div(width + s - 1, s),
            s if s < 0 => floor_div(width + s + 1, s),
            _ => return value_error("zero step for randrange()"),
        };
        if n <= 0 {
            return value_error("empty range for randrange()");
        }
        let r = self.randbelow_u128(n as u128);
        Ok((start + step * r as i128) as i64)
    }

    /// `Random.randrange(stop)`: an int in [0, stop).
    pub fn randrange_stop(&mut self, stop: i64) -> Result<i64, RandError> {
        if stop > 0 {
            return Ok(self.randbelow(stop as u64) as i64);
        }
        value_error("empty range for randrange()")
    }

    /// `Random.randrange(start, stop)`: an int in [start, stop).
    pub fn randrange(&mut self, start: i64, stop: i64) -> Result<i64, RandError> {
        self.randrange_i128(i128::from(start), i128::from(stop), 1)
    }

    /// `Random.randrange(start, stop, step)`.
    pub fn randrange_step(&mut self, start: i64, stop: i64, step: i64) -> Result<i64, RandError> {
        self.randrange_i128(i128::from(start), i128::from(stop), i128::from(step))
    }

    /// `Random.randint(a, b)`: `randrange(a, b + 1)`, an int in [a, b].
    pub fn randint(&mut self, a: i64, b: i64) -> Result<i64, RandError> {
        self.randrange_i128(i128::from(a), i128::from(b) + 1, 1)
    }

    /// `Random.choice(seq)` as an index: `randbelow(len)`; `IndexError` on an empty sequence.
    pub fn choice_index(&mut self, len: usize) -> Result<usize, RandError> {
        if len == 0 {
            return Err(RandError::Index("Cannot choose from an empty sequence".into()));
        }
        Ok(self.randbelow(len as u64) as usize)
    }

    /// `Random.choice(seq)`: a reference to a random element.
    pub fn choice<'a, T>(&mut self, seq: &'a [T]) -> Result<&'a T, RandError> {
        let i = self.choice_index(seq.len())?;
        Ok(&seq[i])
    }

    /// `Random.shuffle(x)`: in place, for i from len-1 down to 1 swap x[i] with x[randbelow(i+1)].
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.randbelow(i as u64 + 1) as usize;
            x.swap(i, j);
        }
    }

    /// `Random.sample(range(n), k)`: `k` distinct indices below `n`, in selection order, by
    /// CPython's pool-list or selected-set method (whichever its set-size heuristic picks).
    pub fn sample_indices(&mut self, n: usize, k: usize) -> Result<Vec<usize>, RandError> {
        if k > n {
            return value_error("Sample larger than population or is negative");
        }
        let mut setsize: u128 = 21; // size of a small set minus size of an empty list
        if k > 5 {
            // 4 ** ceil(log(k * 3, 4)): math.log(x, 4) is log(float(x)) / log(4.0)
            let x = (k as u128 * 3) as f64;
            let e = (x.ln() / 4f64.ln()).ceil();
            setsize += 4u128.pow(e as u32);
        }
        let mut result = Vec::with_capacity(k);
        if n as u128 <= setsize {
            let mut pool: Vec<usize> = (0..n).collect();
            for i in 0..k {
                let j = self.randbelow((n - i) as u64) as usize;
                result.push(pool[j]);
                pool[j] = pool[n - i - 1];
            }
        } else {
            let mut selected: HashSet<usize> = HashSet::with_capacity(k);
            for _ in 0..k {
                let mut j = self.randbelow(n as u64) as usize;
                while selected.contains(&j) {
                    j = self.randbelow(n as u64) as usize;
                }
                selected.insert(j);
                result.push(j);
            }
        }
        Ok(result)
    }

    /// `Random.sample(population, k)`: clones of `k` distinct positions of `population`.
    pub fn sample<T: Clone>(&mut self, population: &[T], k: usize) -> Result<Vec<T>, RandError> {
        Ok(self.sample_indices(population.len(), k)?.into_iter().map(|i| population[i].clone()).collect())
    }

    /// `Random.sample(range(len(counts)), k, counts=counts)` as indices: `sample(range(total), k)`
    /// mapped through `bisect_right` on the running counts.
    pub fn sample_counts_indices(&mut self, counts: &[i64], k: usize) -> Result<Vec<usize>, RandError> {
        let mut cum: Vec<i128> = Vec::with_capacity(counts.len());
        let mut acc: i128 = 0;
        for &c in counts {
            acc += i128::from(c);
            cum.push(acc);
        }
        let Some(total) = cum.pop() else {
            // list(accumulate([])).pop() raises before anything is drawn
            return Err(RandError::Index("pop from empty list".into()));
        };
        if total <= 0 {
            return value_error("Total of counts must be greater than zero");
        }
        let Ok(total) = usize::try_from(total) else {
            return Err(RandError::Value("Total of counts too large for this port".into()));
        };
        let selections = self.sample_indices(total, k)?;
        let len = cum.len();
        Ok(selections.into_iter().map(|s| bisect_right(&cum, &(s as i128), 0, len)).collect())
    }

    /// One draw of `Random.choices(population)` without weights: `floor(random() * n)`
    /// (`n` if `n == 0`, where CPython's indexing raises `IndexError`).
    pub fn choices_index(&mut self, n: usize) -> usize {
        (self.random() * n as f64).floor() as usize
    }

    /// One draw of `Random.choices(population, cum_weights=cum_weights)`, with
    /// `total = cum_weights[-1] + 0.0` already checked:
    /// `bisect_right(cum_weights, random() * total, 0, n - 1)`.
    pub fn choices_cum_index(&mut self, cum_weights: &[f64], total: f64) -> usize {
        let x = self.random() * total;
        bisect_right(cum_weights, &x, 0, cum_weights.len().saturating_sub(1))
    }

    /// `Random.choices(range(n), weights, cum_weights=..., k=k)` as indices, with CPython's
    /// checks and exceptions (relative weights accumulated with float adds left to right).
    pub fn choices_indices(&mut self, n: usize, weights: Weights<'_>, k: usize) -> Result<Vec<usize>, RandError> {
        let accumulated: Vec<f64>;
        let cum: &[f64] = match weights {
            Weights::None => {
                if n == 0 && k > 0 {
                    self.random(); // population[floor(random() * 0.0)] raises after the draw
                    return Err(RandError::Index("list index out of range".into()));
                }
                return Ok((0..k).map(|_| self.choices_index(n)).collect());
            }
            Weights::Relative(w) => {
                let mut acc = 0.0;
                accumulated = w
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| {
                        acc = if i == 0 { x } else { acc + x };
                        acc
                    })
                    .collect();
                &accumulated
            }
            Weights::Cumulative(c) => c,
        };
        if cum.len() != n {
            return value_error("The number of weights does not match the population");
        }
        let Some(&last) = cum.last() else {
            return Err(RandError::Index("list index out of range".into()));
        };
        let total = last + 0.0;
        if total <= 0.0 {
            return value_error("Total of weights must be greater than zero");
        }
        if !total.is_finite() {
            return value_error("Total of weights must be finite");
        }
        Ok((0..k).map(|_| self.choices_cum_index(cum, total)).collect())
    }

    /// `Random.uniform(a, b)`: `a + (b - a) * random()`.
    pub fn uniform(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.random()
    }

    /// `Random.gauss(mu, sigma)`: Box–Muller, keeping the second deviate in `gauss_next`.
    pub fn gauss(&mut self, mu: f64, sigma: f64) -> f64 {
        let z = match self.gauss_next.take() {
            Some(z) => z,
            None => {
                let x2pi = self.random() * TWOPI;
                let g2rad = (-2.0 * (1.0 - self.random()).ln()).sqrt();
                self.gauss_next = Some(x2pi.sin() * g2rad);
                x2pi.cos() * g2rad
            }
        };
        mu + z * sigma
    }
}

// ---------------------------------------------------------------------------------------------
// Python wrapper (for the tests)
// ---------------------------------------------------------------------------------------------

/// The generator `Random.seed(a)` gives for an int (any size, any sign), a float (its hash, as
/// `random_seed`), or a str/bytes/bytearray (version 2: `int.from_bytes(a + sha512(a).digest())`).
fn seeded(a: &PyAny) -> PyResult<PyRandom> {
    let py = a.py();
    let int: &PyAny = if a.is_instance_of::<PyLong>()? {
        a.call_method0("__abs__")?
    } else if a.is_instance_of::<PyFloat>()? {
        // PyLong_FromSize_t((size_t)hash)
        return Ok(PyRandom::from_seed_words(&u64_words(a.hash()? as u64)));
    } else if a.is_instance_of::<PyString>()? || a.is_instance_of::<PyBytes>()? || a.is_instance_of::<PyByteArray>()? {
        let raw: &PyAny = if a.is_instance_of::<PyString>()? { a.call_method0("encode")? } else { a };
        let raw: &PyAny = py.import("builtins")?.getattr("bytes")?.call1((raw,))?;
        let digest = py.import("hashlib")?.getattr("sha512")?.call1((raw,))?.call_method0("digest")?;
        let joined = raw.call_method1("__add__", (digest,))?;
        py.import("builtins")?.getattr("int")?.call_method1("from_bytes", (joined, "big"))?
    } else {
        return Err(PyTypeError::new_err(
            "The only supported seed types are: None,\nint, float, str, bytes, and bytearray.",
        ));
    };
    let bits: u64 = int.call_method0("bit_length")?.extract()?;
    let nbytes = bits.div_ceil(8).max(1);
    let bytes: &PyBytes = int.call_method1("to_bytes", (nbytes, "little"))?.downcast()?;
    Ok(PyRandom::from_seed_le_bytes(bytes.as_bytes()))
}

/// `gpu_arena_rs.Random`: [`PyRandom`] with `random.Random`'s methods, for comparing the two.
#[pyclass(name = "Random", module = "gpu_arena_rs")]
#[derive(Clone)]
pub struct RandomPy {
    /// The Rust generator.
    pub inner: PyRandom,
}

#[pymethods]
impl RandomPy {
    /// `random.Random(a)`.
    #[new]
    fn py_new(a: &PyAny) -> PyResult<Self> {
        Ok(RandomPy { inner: seeded(a)? })
    }

    /// `Random.seed(a)`.
    fn seed(&mut self, a: &PyAny) -> PyResult<()> {
        self.inner = seeded(a)?;
        Ok(())
    }

    /// A generator continuing from `random.Random.getstate()`'s tuple.
    #[staticmethod]
    fn from_state(state: &PyAny) -> PyResult<Self> {
        Ok(RandomPy { inner: PyRandom::from_py_state(state)? })
    }

    /// `Random.getstate()`.
    fn getstate(&self, py: Python) -> PyResult<PyObject> {
        self.inner.to_py_state(py)
    }

    /// `Random.setstate(state)`.
    fn setstate(&mut self, state: &PyAny) -> PyResult<()> {
        self.inner = PyRandom::from_py_state(state)?;
        Ok(())
    }

    /// `Random.random()`.
    fn random(&mut self) -> f64 {
        self.inner.random()
    }

    /// `Random.getrandbits(k)` for any `k >= 0`.
    fn getrandbits(&mut self, py: Python, k: i64) -> PyResult<PyObject> {
        if k < 0 {
            return Err(PyValueError::new_err("number of bits must be non-negative"));
        }
        if k <= 64 {
            return Ok(self.inner.getrandbits(k as u32).to_object(py));
        }
        let bytes: Vec<u8> = self.inner.getrandbits_words(k as u64).iter().flat_map(|w| w.to_le_bytes()).collect();
        let int = py.import("builtins")?.getattr("int")?;
        Ok(int.call_method1("from_bytes", (PyBytes::new(py, &bytes), "little"))?.to_object(py))
    }

    /// `Random._randbelow(n)` for `0 < n < 2**64` (`ValueError` for 0, where CPython never returns).
    fn randbelow(&mut self, n: &PyAny) -> PyResult<u64> {
        let n: u64 = n.extract().map_err(|_| PyOverflowError::new_err("n must fit 0 < n < 2**64"))?;
        if n == 0 {
            return Err(PyValueError::new_err("randbelow(0) never returns"));
        }
        Ok(self.inner.randbelow(n))
    }

    /// `Random.randrange(start, stop=None, step=1)` on `i64`s.
    #[args(stop = "None", step = "1")]
    fn randrange(&mut self, start: i64, stop: Option<i64>, step: i64) -> PyResult<i64> {
        match stop {
            None if step != 1 => Err(PyTypeError::new_err("Missing a non-None stop argument")),
            None => Ok(self.inner.randrange_stop(start)?),
            Some(stop) => Ok(self.inner.randrange_step(start, stop, step)?),
        }
    }

    /// `Random.randint(a, b)` on `i64`s.
    fn randint(&mut self, a: i64, b: i64) -> PyResult<i64> {
        Ok(self.inner.randint(a, b)?)
    }

    /// `Random.choice(seq)`.
    fn choice(&mut self, seq: Vec<PyObject>) -> PyResult<PyObject> {
        Ok(self.inner.choice(&seq)?.clone())
    }

    /// `Random.shuffle(x)` on a copy of `x`, returned.
    fn shuffle(&mut self, py: Python, x: Vec<PyObject>) -> PyObject {
        let mut x = x;
        self.inner.shuffle(&mut x);
        PyList::new(py, x).to_object(py)
    }

    /// `Random.sample(population, k, *, counts=None)`.
    #[args(population, k, "*", counts = "None")]
    fn sample(&mut self, py: Python, population: Vec<PyObject>, k: i64, counts: Option<Vec<i64>>) -> PyResult<PyObject> {
        // a negative k fails `0 <= k <= n` at the same point as CPython's, where k = usize::MAX does
        let k = usize::try_from(k).unwrap_or(usize::MAX);
        let picked: Vec<PyObject> = match counts {
            Some(counts) => {
                if counts.len() != population.len() {
                    return Err(PyValueError::new_err("The number of counts does not match the population"));
                }
                self.inner.sample_counts_indices(&counts, k)?.into_iter().map(|i| population[i].clone()).collect()
            }
            None => {
                self.inner.sample(&population, k)?
            }
        };
        Ok(PyList::new(py, picked).to_object(py))
    }

    /// `Random.choices(population, weights=None, *, cum_weights=None, k=1)` (weights as floats).
    #[args(population, weights = "None", "*", cum_weights = "None", k = "1")]
    fn choices(
        &mut self,
        py: Python,
        population: Vec<PyObject>,
        weights: Option<Vec<f64>>,
        cum_weights: Option<Vec<f64>>,
        k: i64,
    ) -> PyResult<PyObject> {
        let w = match (&weights, &cum_weights) {
            (None, None) => Weights::None,
            (Some(w), None) => Weights::Relative(w),
            (None, Some(c)) => Weights::Cumulative(c),
            (Some(_), Some(_)) => {
                return Err(PyTypeError::new_err("Cannot specify both weights and cumulative weights"))
            }
        };
        let k = usize::try_from(k).unwrap_or(0); // repeat(None, k) is empty for k < 0
        let picked: Vec<PyObject> = self
            .inner
            .choices_indices(population.len(), w, k)?
            .into_iter()
            .map(|i| population[i].clone())
            .collect();
        Ok(PyList::new(py, picked).to_object(py))
    }

    /// `Random.uniform(a, b)`.
    fn uniform(&mut self, a: f64, b: f64) -> f64 {
        self.inner.uniform(a, b)
    }

    /// `Random.gauss(mu=0.0, sigma=1.0)`.
    #[args(mu = "0.0", sigma = "1.0")]
    fn gauss(&mut self, mu: f64, sigma: f64) -> f64 {
        self.inner.gauss(mu, sigma)
    }
}

/// Adds `Random` to the module.
pub fn register(_py: Python, m: &PyModule) -> PyResult<()> {
    m.add_class::<RandomPy>()?;
    Ok(())
}
