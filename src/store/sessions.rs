//! Browser sessions.

use super::{Result, Store, now_ms, on_db};

/// A live browser session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    pub csrf: String,
    pub expires_at: i64,
}

impl Store {
    pub async fn create_session(&self, id_hash: &str, csrf: &str, ttl_ms: i64) -> Result<()> {
        let now = now_ms();
        on_db!(self.db(), pool => {
            sqlx::query("DELETE FROM web_sessions WHERE expires_at < $1").bind(now).execute(pool).await?;
            sqlx::query("INSERT INTO web_sessions (id_hash, csrf, created_at, expires_at) VALUES ($1, $2, $3, $4)")
                .bind(id_hash)
                .bind(csrf)
                .bind(now)
                .bind(now + ttl_ms)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// The session with this id digest, if it has not expired.
    pub async fn session(&self, id_hash: &str) -> Result<Option<WebSession>> {
        let now = now_ms();
        let row: Option<(String, i64)> = on_db!(self.db(), pool => {
            sqlx::query_as("SELECT csrf, expires_at FROM web_sessions WHERE id_hash = $1 AND expires_at >= $2")
                .bind(id_hash)
                .bind(now)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(|(csrf, expires_at)| WebSession { csrf, expires_at }))
    }

    pub async fn delete_session(&self, id_hash: &str) -> Result<()> {
        on_db!(self.db(), pool => {
            sqlx::query("DELETE FROM web_sessions WHERE id_hash = $1").bind(id_hash).execute(pool).await?;
        });
        Ok(())
    }
}
