//! Where operations run: in this process (the daemon itself, or the fallback when no daemon
//! can be reached) or forwarded to the daemon that owns the database.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::ops::Op;
use cairn_core::{CairnError, ErrorCode, Result};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::client::{DaemonClient, autostart};
use crate::db::Db;

#[derive(Debug, Clone)]
pub enum Backend {
    Local(Arc<Db>),
    Remote(DaemonClient),
    /// Resolved on first use (or in the background): `cairn mcp` answers `initialize` at once
    /// while it finds or starts the daemon.
    Deferred(Arc<Deferred>),
}

/// How to reach the store of a data dir: its daemon, a daemon started for it, or the file.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub data_dir: PathBuf,
    pub db_path: PathBuf,
    pub token: Option<String>,
    pub port: u16,
    /// Start a daemon when none runs (with this executable).
    pub autostart: Option<PathBuf>,
    /// Ignore any daemon and open the database directly.
    pub direct: bool,
    /// Semantic search when the database is opened here (`None`: lexical only).
    pub embedder: Option<cairn_core::settings::EmbedderConfig>,
}

#[derive(Debug)]
pub struct Deferred {
    options: ConnectOptions,
    cell: OnceCell<Backend>,
    /// The database opened here once the daemon went away (opened once: opening starts
    /// threads and builds a search index).
    fallback: OnceCell<Arc<Db>>,
}

impl Backend {
    /// A backend that connects on first use; [`Backend::warm_up`] starts connecting now.
    pub fn deferred(options: ConnectOptions) -> Backend {
        Backend::Deferred(Arc::new(Deferred { options, cell: OnceCell::new(), fallback: OnceCell::new() }))
    }

    /// Begin resolving a deferred backend in the background.
    pub fn warm_up(&self) {
        if let Backend::Deferred(d) = self {
            let d = Arc::clone(d);
            tokio::spawn(async move {
                let _ = d.resolve().await;
            });
        }
    }

    pub async fn execute(&self, op: Op) -> Result<Value> {
        match self {
            Backend::Local(db) => db.execute(op).await,
            Backend::Remote(client) => {
                let client = client.clone();
                tokio::task::spawn_blocking(move || client.execute(&op))
                    .await
                    .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?
            }
            Backend::Deferred(d) => {
                let backend = d.resolve().await?;
                let result = Box::pin(backend.execute(op.clone())).await;
                match result {
                    // The daemon went away (and surely did not run it): carry on with the
                    // database file itself.
                    Err(e) if e.code == ErrorCode::DaemonUnavailable => {
                        let db = d
                            .fallback
                            .get_or_try_init(|| async {
                                tracing::warn!(error = %e, "daemon unavailable; opening the database directly");
                                open_local(&d.options)
                            })
                            .await?;
                        Box::pin(Backend::Local(Arc::clone(db)).execute(op)).await
                    }
                    other => other,
                }
            }
        }
    }

    /// Run an operation and decode its result.
    pub async fn call<T: serde::de::DeserializeOwned>(&self, op: Op) -> Result<T> {
        let value = self.execute(op).await?;
        serde_json::from_value(value).map_err(|e| CairnError::internal(format!("unexpected result shape: {e}")))
    }
}

impl Deferred {
    async fn resolve(&self) -> Result<Backend> {
        let options = self.options.clone();
        self.cell
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || connect(&options))
                    .await
                    .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?
            })
            .await
            .cloned()
    }
}

/// Find the daemon of the data dir, start one if allowed, else open the database here.
pub fn connect(options: &ConnectOptions) -> Result<Backend> {
    if !options.direct {
        if let Some(client) = DaemonClient::discover(&options.data_dir, options.token.clone()) {
            tracing::debug!(addr = %client.addr, "using the running daemon");
            return Ok(Backend::Remote(client));
        }
        if let Some(exe) = &options.autostart {
            let started =
                autostart(exe, &options.data_dir, options.port, options.token.clone(), Duration::from_secs(3));
            if let Some(client) = started {
                tracing::debug!(addr = %client.addr, "started a daemon");
                return Ok(Backend::Remote(client));
            }
            tracing::warn!("could not start the daemon; opening the database directly");
        }
    }
    Ok(Backend::Local(open_local(options)?))
}

fn open_local(options: &ConnectOptions) -> Result<Arc<Db>> {
    let semantic = options.embedder.as_ref().and_then(crate::embedder::semantic);
    Db::open_with(&options.db_path, semantic)
}
