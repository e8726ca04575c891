//! The connection pool and the schema migrations.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use crate::error::{HubError, HubErrorCode};

/// How long a request waits for a connection before answering 503: long enough to ride out
/// a burst, short enough that a client backs off instead of hanging while PostgreSQL is down.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);
const POOL_SIZE: usize = 16;
/// Session-level advisory lock taken while migrating, so two hubs starting at once on one
/// database do not both run the same migration (refinery takes no lock of its own).
const MIGRATION_LOCK_KEY: i64 = 0x6361_6972_6e5f_6d67; // "cairn_mg"

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// A pool over `database_url` (a `postgres://` URL or a libpq key=value string). Connections
/// are made on demand, so a pool made while PostgreSQL is down works once it is back.
pub fn pool(database_url: &str) -> Result<Pool, HubError> {
    let config: tokio_postgres::Config = database_url
        .parse()
        .map_err(|e| HubError::new(HubErrorCode::InvalidDatabaseUrl, format!("cannot parse the database URL: {e}")))?;
    // `Fast` recycling checks only that the connection task is alive; a connection PostgreSQL
    // dropped fails its next query (503, the client retries) and is then discarded.
    let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager)
        .max_size(POOL_SIZE)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(ACQUIRE_TIMEOUT))
        .create_timeout(Some(ACQUIRE_TIMEOUT))
        .recycle_timeout(Some(ACQUIRE_TIMEOUT))
        .build()
        .map_err(|e| HubError::new(HubErrorCode::Internal, format!("cannot build the connection pool: {e}")))
}

/// Bring the schema up to date (idempotent; safe with several hubs starting together).
pub async fn migrate(pool: &Pool) -> Result<(), HubError> {
    let mut client = pool.get().await?;
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_KEY]).await?;
    let outcome = embedded::migrations::runner().run_async(&mut **client).await;
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_KEY]).await?;
    outcome.map(|_| ()).map_err(|e| HubError::new(HubErrorCode::Internal, format!("database migration failed: {e}")))
}
