//! The integration tests of the `cairn` binary: one test binary (link time dominates on small
//! machines), one module per area.

mod cli;
mod concurrency;
mod semantic;
mod support;
