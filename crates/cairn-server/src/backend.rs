//! Where operations run: in this process (the daemon itself, or the fallback when no daemon
//! can be reached) or forwarded to the daemon that owns the database.

use std::sync::Arc;

use cairn_core::ops::Op;
use cairn_core::{CairnError, Result};
use serde_json::Value;

use crate::client::DaemonClient;
use crate::db::Db;

#[derive(Debug, Clone)]
pub enum Backend {
    Local(Arc<Db>),
    Remote(DaemonClient),
}

impl Backend {
    pub async fn execute(&self, op: Op) -> Result<Value> {
        match self {
            Backend::Local(db) => db.execute(op).await,
            Backend::Remote(client) => {
                let client = client.clone();
                tokio::task::spawn_blocking(move || client.execute(&op))
                    .await
                    .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?
            }
        }
    }

    /// Run an operation and decode its result.
    pub async fn call<T: serde::de::DeserializeOwned>(&self, op: Op) -> Result<T> {
        let value = self.execute(op).await?;
        serde_json::from_value(value).map_err(|e| CairnError::internal(format!("unexpected result shape: {e}")))
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Backend::Remote(_))
    }
}
