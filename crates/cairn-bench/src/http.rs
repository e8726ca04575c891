//! The bench speaks through cairn's one HTTP client (`cairn-http`): one keep-alive connection
//! per client, loopback only, small on purpose so the bench measures the server.

pub use cairn_http::{BaseUrl, Client, Error, Response, encode};
