//! What lab read of each run's transcript (`run_usage`): where it is, how
//! far it was read, the totals so far. Written only by the usage pass;
//! requests read the totals with the run (`runs.rs` joins them).

use super::Written;
use sqlx::FromRow;

use super::{Result, Store, StoreError, on_db};
use crate::domain::Usage;
use crate::usage::{Carry, Tally};

/// A run's reading of its transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageRead {
    /// The transcript, once found.
    pub transcript: Option<String>,
    /// Bytes read so far (whole lines only).
    pub offset: i64,
    pub tally: Tally,
    /// The run ended and its transcript was read a last time.
    pub done: bool,
}

#[derive(FromRow)]
struct Row {
    transcript: Option<String>,
    read_offset: i64,
    carry: String,
    input_tokens: i64,
    output_tokens: i64,
    cache_read_tokens: i64,
    cache_creation_tokens: i64,
    turns: i64,
    cost_nano_usd: Option<i64>,
    unpriced_tokens: i64,
    done: bool,
}

impl Store {
    /// What was read of a run's transcript (nothing yet: the default).
    pub async fn usage_read(&self, run_id: i64) -> Result<UsageRead> {
        let row: Option<Row> = on_db!(self.db(), pool => {
            sqlx::query_as(
                "SELECT transcript, read_offset, carry, input_tokens, output_tokens, cache_read_tokens, \
                 cache_creation_tokens, turns, cost_nano_usd, unpriced_tokens, done FROM run_usage WHERE run_id = $1",
            )
            .bind(run_id)
            .fetch_optional(pool)
            .await?
        });
        let Some(r) = row else {
            return Ok(UsageRead::default());
        };
        let carry: Carry = serde_json::from_str(&r.carry)
            .map_err(|e| StoreError::Corrupt(format!("run {run_id} usage carry: {e}")))?;
        Ok(UsageRead {
            transcript: r.transcript,
            offset: r.read_offset,
            tally: Tally {
                usage: Usage {
                    input_tokens: r.input_tokens,
                    output_tokens: r.output_tokens,
                    cache_read_tokens: r.cache_read_tokens,
                    cache_creation_tokens: r.cache_creation_tokens,
                    turns: r.turns,
                    cost_nano_usd: r.cost_nano_usd,
                    unpriced_tokens: r.unpriced_tokens,
                },
                carry,
                agent: None,
            },
            done: r.done,
        })
    }

    /// Records what was read of a run's transcript.
    pub async fn save_usage_read(&self, run_id: i64, r: &UsageRead) -> Result<()> {
        let carry = serde_json::to_string(&r.tally.carry).unwrap_or_else(|_| "{}".into());
        let u = &r.tally.usage;
        on_db!(self.db(), pool => {
            sqlx::query(
                "INSERT INTO run_usage (run_id, transcript, read_offset, carry, input_tokens, output_tokens, \
                 cache_read_tokens, cache_creation_tokens, turns, cost_nano_usd, done, unpriced_tokens) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                 ON CONFLICT (run_id) DO UPDATE SET transcript = $2, read_offset = $3, carry = $4, \
                 input_tokens = $5, output_tokens = $6, cache_read_tokens = $7, \
                 cache_creation_tokens = $8, turns = $9, cost_nano_usd = $10, done = $11, \
                 unpriced_tokens = $12",
            )
            .bind(run_id)
            .bind(&r.transcript)
            .bind(r.offset)
            .bind(&carry)
            .bind(u.input_tokens)
            .bind(u.output_tokens)
            .bind(u.cache_read_tokens)
            .bind(u.cache_creation_tokens)
            .bind(u.turns)
            .bind(u.cost_nano_usd)
            .bind(r.done)
            .bind(u.unpriced_tokens)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// Records the session id read from a run's CLI (Codex), once.
    pub async fn set_cli_session_id(&self, run_id: i64, id: &str) -> Result<()> {
        let _counted = self.writing(Written::Runs);
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE runs SET cli_session_id = $1 WHERE id = $2 AND cli_session_id IS NULL")
                .bind(id)
                .bind(run_id)
                .execute(pool)
                .await?;
        });
        Ok(())
    }
}
