//! cairn-server: the daemon's HTTP door, thin over cairn-core: engram's routes plus cairn's
//! ([`http`]), on cairn-engine's `Engine`. The MCP server is cairn-mcp's; the daemon nests its
//! router at `/mcp` ([`http::HttpConfig::mcp`]). This crate starts no thread and opens no
//! database of its own.

pub mod http;
