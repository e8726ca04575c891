//! What both ends of a cairn wire compile, so neither keeps its own copy:
//!
//! - [`sync`]: engram cloud's mutation push/pull protocol as the hub serves it and the client
//!   speaks it (docs/HUB.md), with the hub's limits;
//! - [`hub::HubErrorCode`]: the hub's refusal codes, which clients match on;
//! - [`error_table!`]: the macro every error table is written with (this one's, and
//!   `cairn-base`'s `ErrorCode`), so a code's name, status and exit code sit on one line.
//!
//! It depends on serde only: the hub (which depends on no other cairn crate) and `cairn-base`
//! both build on it.

mod error_table;
pub mod hub;
pub mod sync;
