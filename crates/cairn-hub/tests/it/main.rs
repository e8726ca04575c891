//! cairn-hub's integration tests: a real PostgreSQL (a throwaway cluster per test, see
//! `cairn_pgtest`), hubs in this process or as child processes, a real HTTP client.

mod auth;
mod bad_input;
mod faults;
mod support;
mod sync;
mod tls;

/// Not a test: the hub process that the process-level tests start by running this binary
/// again with `CAIRN_HUB_CHILD_DB` set (a real process they can SIGKILL). Without that
/// variable it returns at once.
#[test]
fn hub_child_process() {
    let Ok(database_url) = std::env::var("CAIRN_HUB_CHILD_DB") else { return };
    let listen = std::env::var("CAIRN_HUB_CHILD_LISTEN").expect("CAIRN_HUB_CHILD_LISTEN");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async move {
        let hub =
            cairn_hub::bind(&cairn_hub::ServeConfig { database_url, listen, tls: None }).await.expect("bind the hub");
        hub.run(std::future::pending()).await.expect("serve");
    });
}
