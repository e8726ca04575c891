//! Integration tests of cairn-server: servers started in-process on port 0, real clients.

mod http;
