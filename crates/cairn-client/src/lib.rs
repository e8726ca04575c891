//! cairn-client: how any cairn process reaches the store of a data dir. [`Client`] runs
//! operations in the daemon (found through `daemon.json`, or started), or on the database
//! file in this process when no daemon can be had or none is wanted; [`daemon`] is the
//! discovery, autostart and the small loopback HTTP client of `POST /v1/op`.
//!
//! The CLI, `cairn mcp`, `cairn hook` and the daemon's own doors all use this one type, so
//! `CAIRN_AUTOSTART`, `CAIRN_DIRECT` and the fallback rules mean the same for every process.

mod client;
pub mod daemon;

pub use client::{Client, ConnectOptions, Delivered, LocalKind, Role, canonical_data_dir};
pub use daemon::{DaemonClient, DaemonInfo, DaemonLock};
