//! cairn's team hub: engram cloud's mutation push/pull protocol over one PostgreSQL database.
//!
//! `cairn hub serve` (the `hub` feature of the `cairn` binary) runs [`server::bind`] then
//! [`server::BoundHub::run`]; `cairn hub token` calls [`tokens`]. The wire format (shared with
//! the client) and the error codes are in `cairn-wire`, and docs/HUB.md. Tests make their
//! PostgreSQL cluster with `cairn-pgtest`.

pub mod db;
pub mod error;
pub mod server;
pub mod store;
pub mod tokens;
mod validate;

pub use error::{HubError, HubErrorCode};
pub use server::{BoundHub, ServeConfig, TlsFiles, bind};
