//! `gpu_arena.core.rules.outcome`: what applying an action yields.

use std::collections::BTreeSet;

/// `ActionError`: a refused action; `code` is stable, `message` is for people.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionError {
    pub code: String,
    pub message: String,
}

impl ActionError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        ActionError { code: code.to_string(), message: message.into() }
    }
}

/// A rule's result: the applied action's outcome, or why it was refused.
pub type RuleResult<T> = Result<T, ActionError>;

/// `Outcome`: an applied action's reward-column category, the labs whose potential it may have
/// changed, its breaches and a note. `affected` is a Python set: only membership is ever read, so
/// an ordered set stands for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub category: &'static str,
    pub affected: BTreeSet<String>,
    pub note: String,
    pub breaches: i64,
}

impl Outcome {
    /// `Outcome(note=...)`: category "none", nobody affected.
    pub fn note(note: impl Into<String>) -> Self {
        Outcome { category: "none", affected: BTreeSet::new(), note: note.into(), breaches: 0 }
    }

    /// `Outcome(category, affected, note, breaches)`.
    pub fn new(category: &'static str, affected: impl IntoIterator<Item = String>, note: impl Into<String>,
               breaches: i64) -> Self {
        Outcome { category, affected: affected.into_iter().collect(), note: note.into(), breaches }
    }
}
