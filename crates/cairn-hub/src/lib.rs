//! cairn's team hub: engram cloud's mutation push/pull protocol over one PostgreSQL database.
//!
//! `cairn hub serve` (the `hub` feature of the `cairn` binary) runs [`server::bind`] then
//! [`server::BoundHub::run`]; `cairn hub token` calls [`tokens`]. The wire format is in
//! [`wire`] and docs/HUB.md. [`pgtest`] makes a throwaway PostgreSQL cluster for tests.

pub mod db;
pub mod error;
pub mod pgtest;
pub mod server;
pub mod store;
pub mod tokens;
mod validate;
pub mod wire;

pub use error::{HubError, HubErrorCode};
pub use server::{BoundHub, ServeConfig, TlsFiles, bind};
