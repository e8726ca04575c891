//! Integration tests of cairn-mcp: servers over an in-process engine or a real daemon's HTTP
//! door on port 0, driven by rmcp's client.

mod mcp;
