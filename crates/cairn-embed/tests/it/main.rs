//! cairn-embed's integration tests: one test binary, one module per area.

mod e5;
#[cfg(feature = "remote")]
mod http;
mod model;
mod nomic;
