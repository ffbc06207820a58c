//! windowfit's Rust core: exact cached token counting, tool-pair-safe window fitting and
//! token-exact truncation. Pure Rust; the PyO3 bindings live in `py` (feature "python").

pub mod cache;
pub mod count;
pub mod error;
pub mod fit;
pub mod memory;
pub mod message;
pub mod parallel;
pub mod recall;
pub mod registry;
pub mod stored_text;
pub mod tokenize;
pub mod truncate;

#[cfg(feature = "python")]
mod py;
