//! cairn-embed's integration tests: one test binary, one module per area.

mod e5;
mod gemma;
#[cfg(feature = "remote")]
mod http;
mod model;
mod nomic;
mod reference;
