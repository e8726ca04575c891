//! cairn-embed's integration tests: one test binary, one module per area.

#[cfg(feature = "remote")]
mod http;
mod model;
