//! How a built-in pull request ended: merged (with the commits of the
//! merge) or closed. A pull request ends once: every write is conditional on
//! it being open.

use sqlx::FromRow;

use super::{Result, Store, now_ms, on_db};

/// A merge as stored on its pull request.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct PullMerge {
    pub merged_sha: Option<String>,
    pub merged_base: Option<String>,
    pub merged_head: Option<String>,
    pub merged_at: Option<i64>,
}

impl Store {
    /// Marks an open pull request merged; false when it was not open.
    pub async fn set_pull_merged(
        &self,
        repo_id: i64,
        number: i64,
        sha: &str,
        base: &str,
        head: &str,
    ) -> Result<bool> {
        let done = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE pulls SET state = 'merged', merged_sha = $1, merged_base = $2, merged_head = $3, \
                 merged_at = $4 WHERE repo_id = $5 AND number = $6 AND state = 'open'",
            )
            .bind(sha)
            .bind(base)
            .bind(head)
            .bind(now_ms())
            .bind(repo_id)
            .bind(number)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(done == 1)
    }

    /// Marks an open pull request closed; false when it was not open.
    pub async fn set_pull_closed(&self, repo_id: i64, number: i64) -> Result<bool> {
        let done = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE pulls SET state = 'closed' WHERE repo_id = $1 AND number = $2 AND state = 'open'",
            )
            .bind(repo_id)
            .bind(number)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(done == 1)
    }

    /// The merge of a pull request (all `None` until it is merged).
    pub async fn pull_merge(&self, repo_id: i64, number: i64) -> Result<PullMerge> {
        let row: Option<PullMerge> = on_db!(self.db(), pool => {
            sqlx::query_as(
                "SELECT merged_sha, merged_base, merged_head, merged_at FROM pulls \
                 WHERE repo_id = $1 AND number = $2",
            )
            .bind(repo_id)
            .bind(number)
            .fetch_optional(pool)
            .await?
        });
        row.ok_or(super::StoreError::NotFound)
    }
}
