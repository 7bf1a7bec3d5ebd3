//! The rules, mirroring `gpu_arena.core.rules`: validate and apply one seat's action, and advance
//! the clock. Every handler validates completely before it mutates anything, so a refused action
//! leaves the world exactly as it was.

pub mod auctions;
pub mod checks;
pub mod clock;
pub mod coalitions;
pub mod dispatch;
pub mod holdings;
pub mod limits;
pub mod offers;
pub mod outcome;
