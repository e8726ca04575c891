//! cairn-server: the daemon's doors, thin over cairn-core: the HTTP API ([`http`], engram's
//! routes plus cairn's) and the MCP server ([`mcp`], over stdio or streamable HTTP). The
//! runtime they run on is cairn-engine's `Engine`; they reach it through cairn-client's
//! `Client` (MCP) or hold the daemon's engine (HTTP). This crate starts no thread and opens
//! no database of its own.

pub mod http;
pub mod mcp;
