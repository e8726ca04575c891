//! cairn-base: what the memory store (`cairn-core`) and the history archive (`cairn-history`)
//! both build on, and nothing else: [`error`] (the one error table), [`clock`], [`text`]
//! (redaction, limits, normalisation), [`settings`], [`project`] (identity), [`context_window`]
//! (how full a model's window is), [`query`] (the search query parser), [`migrate`] (the
//! migration runner) and [`vacuum`] (a file rebuilt with its copy on disk). It holds no store and no rule of either.

pub mod clock;
pub mod context_window;
pub mod error;
pub mod lenient;
pub mod migrate;
pub mod project;
pub mod query;
pub mod settings;
pub mod text;
pub mod vacuum;

pub use error::{CairnError, ErrorCode, Result};
