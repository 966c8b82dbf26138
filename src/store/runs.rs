//! Run rows. State changes are conditional updates (`WHERE state IN …`), so
//! two parties racing to end a run (a stop and the reconcile loop, say)
//! cannot both win.

use super::Written;
use super::run_row::{COLUMNS, RunRow, USAGE_COLUMNS, USAGE_JOIN};
use super::{RepoKey, Result, Store, StoreError, now_ms, on_db, on_read};
use crate::domain::{AgentBy, AgentState, Run, RunIssue, RunKind, RunState, StopCause};
use crate::resolve::Resolved;

/// The SQL list of live states, for `state IN (…)`: the states
/// [`RunState::is_active`] accepts (a unit test keeps the two in step).
pub(crate) const ACTIVE_STATES_SQL: &str = "('starting', 'running', 'waiting')";

/// A run about to start.
pub struct NewRun<'a> {
    pub kind: RunKind,
    pub repo_id: i64,
    pub repo_name: &'a str,
    pub resolved: &'a Resolved,
    pub prompt: &'a str,
    pub node: &'a str,
    pub token_hash: &'a str,
    /// Whether the run starts in lab's sandbox.
    pub sandboxed: bool,
    /// The caps it runs under.
    pub limits: crate::domain::RunLimits,
    /// The session id lab chose for the agent CLI, when the CLI takes one.
    pub cli_session_id: Option<&'a str>,
    /// The issue it works on, when it has one.
    pub issue: Option<&'a RunIssue>,
    /// The knobs it runs with (AFK runs), with their sources.
    pub knobs: &'a [crate::knob::Resolved],
    /// The budgets its issue lowered, when it did.
    pub issue_budget: Option<&'a crate::domain::IssueBudget>,
}

/// Where a run lives, derived from its id once the id is known.
pub struct RunPlaces {
    pub session: String,
    pub workspace: String,
    pub branch: String,
    pub log_path: String,
}

/// Which runs to list.
#[derive(Debug, Default, Clone)]
pub struct RunFilter {
    pub repo: Option<RepoKey>,
    pub state: Option<RunState>,
    pub kind: Option<RunKind>,
    pub limit: Option<i64>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Ending {
    pub state: RunState,
    pub reason: Option<String>,
    pub exit_status: Option<i64>,
    pub exit_signal: Option<i64>,
    /// End the run only if it is still in this state (the state a decision
    /// was based on); `None`: in any live state.
    pub from: Option<RunState>,
    /// Why lab stopped the run, when it did.
    pub stop_cause: Option<StopCause>,
}

impl Store {
    /// Records a new run in state `starting`, with every place it will use
    /// (session, workspace, branch, log), so a crash at any later point
    /// leaves a row that reconcile can match to what exists.
    pub async fn insert_run(
        &self,
        new: &NewRun<'_>,
        places: impl FnOnce(i64) -> RunPlaces,
    ) -> Result<Run> {
        let _counted = self.writing(Written::Runs);
        let now = now_ms();
        let options = serde_json::to_string(&new.resolved.options).unwrap_or_else(|_| "{}".into());
        let knobs = serde_json::to_string(new.knobs).unwrap_or_else(|_| "[]".into());
        let issue_budget = new
            .issue_budget
            .filter(|b| !b.is_empty())
            .map(|b| serde_json::to_string(b).unwrap_or_else(|_| "{}".into()));
        let update = format!(
            "UPDATE runs SET session = $1, workspace = $2, branch = $3, log_path = $4 WHERE id = $5 RETURNING {COLUMNS}"
        );
        // Two statements, no transaction: nothing outside the database
        // happens between them, so a crash in between leaves a `starting` row
        // with no session, which the next reconcile pass fails.
        let row: RunRow = on_db!(self.db(), pool => {
            let (id,): (i64,) = sqlx::query_as(
                "INSERT INTO runs (kind, repo_id, repo_name, provider, model, model_source, effort, effort_source, \
                 options, prompt, state, node, session, token_hash, created_at, sandboxed, cli_session_id, \
                 issue_number, issue_title, issue_url, memory_max_mb, pids_max, knobs, issue_budget) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'starting', $11, '', $12, $13, $14, $15, $16, $17, $18, $19, $20, \
                 $21, $22) \
                 RETURNING id",
            )
            .bind(new.kind.as_str())
            .bind(new.repo_id)
            .bind(new.repo_name)
            .bind(new.resolved.provider.as_str())
            .bind(&new.resolved.model.value)
            .bind(new.resolved.model.layer.as_str())
            .bind(&new.resolved.effort.value)
            .bind(new.resolved.effort.layer.as_str())
            .bind(&options)
            .bind(new.prompt)
            .bind(new.node)
            .bind(new.token_hash)
            .bind(now)
            .bind(new.sandboxed)
            .bind(new.cli_session_id)
            .bind(new.issue.map(|i| i.number))
            .bind(new.issue.map(|i| i.title.as_str()))
            .bind(new.issue.and_then(|i| i.url.as_deref()))
            .bind(new.limits.memory_max_mb)
            .bind(new.limits.pids_max)
            .bind(&knobs)
            .bind(&issue_budget)
            .fetch_one(pool)
            .await?;
            let p = places(id);
            sqlx::query_as(sqlx::AssertSqlSafe(update))
                .bind(&p.session)
                .bind(&p.workspace)
                .bind(&p.branch)
                .bind(&p.log_path)
                .bind(id)
                .fetch_one(pool)
                .await?
        });
        row.try_into()
    }

    pub async fn run(&self, id: i64) -> Result<Run> {
        let sql = format!("SELECT {COLUMNS}, {USAGE_COLUMNS} FROM runs {USAGE_JOIN} WHERE id = $1");
        let row: Option<RunRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(pool).await?
        });
        row.ok_or(StoreError::NotFound)?.try_into()
    }

    /// Runs, newest first.
    pub async fn runs(&self, f: &RunFilter) -> Result<Vec<Run>> {
        let mut sql =
            format!("SELECT {COLUMNS}, {USAGE_COLUMNS} FROM runs {USAGE_JOIN} WHERE 1 = 1");
        let mut n = 0;
        let mut next = || {
            n += 1;
            format!("${n}")
        };
        match &f.repo {
            Some(RepoKey::Id(_)) => sql.push_str(&format!(" AND repo_id = {}", next())),
            Some(RepoKey::Name(_)) => sql.push_str(&format!(" AND repo_name = {}", next())),
            None => {}
        }
        if f.state.is_some() {
            sql.push_str(&format!(" AND state = {}", next()));
        }
        if f.kind.is_some() {
            sql.push_str(&format!(" AND kind = {}", next()));
        }
        sql.push_str(&format!(" ORDER BY id DESC LIMIT {}", next()));
        let rows: Vec<RunRow> = on_db!(self.db(), pool => {
            let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql));
            match &f.repo {
                Some(RepoKey::Id(id)) => q = q.bind(*id),
                Some(RepoKey::Name(name)) => q = q.bind(name.clone()),
                None => {}
            }
            if let Some(s) = f.state {
                q = q.bind(s.as_str());
            }
            if let Some(k) = f.kind {
                q = q.bind(k.as_str());
            }
            q.bind(f.limit.unwrap_or(1000)).fetch_all(pool).await?
        });
        rows.into_iter().map(Run::try_from).collect()
    }

    /// The runs of `node` that may still have a live process.
    pub async fn active_runs(&self, node: &str) -> Result<Vec<Run>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM runs WHERE node = $1 AND state IN {ACTIVE_STATES_SQL} ORDER BY id"
        );
        let rows: Vec<RunRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(node).fetch_all(pool).await?
        });
        rows.into_iter().map(Run::try_from).collect()
    }

    /// The runs of `node` whose transcript the usage pass reads: the live
    /// ones, and those that ended after `ended_since` (ms) and were not read
    /// a last time.
    pub async fn runs_to_tally(&self, node: &str, ended_since: i64) -> Result<Vec<Run>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM runs {USAGE_JOIN} WHERE node = $1 AND (state IN {ACTIVE_STATES_SQL} \
             OR (ended_at >= $2 AND (u.done IS NULL OR NOT u.done))) ORDER BY id LIMIT 200"
        );
        let rows: Vec<RunRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(node).bind(ended_since).fetch_all(pool).await?
        });
        rows.into_iter().map(Run::try_from).collect()
    }

    /// `starting` → `running`; the run as it is now, or `None` when it was
    /// no longer starting. A resumed run keeps its first start's time (its
    /// time limit and its receipt's first round count from it).
    pub async fn mark_running(
        &self,
        id: i64,
        pid: i64,
        pid_start: Option<u64>,
    ) -> Result<Option<Run>> {
        let _counted = self.writing(Written::Runs);
        let now = now_ms();
        let sql = format!(
            "UPDATE runs SET state = 'running', pid = $1, pid_start = $2, started_at = COALESCE(started_at, $3), \
             agent_state = CASE WHEN agent_state IS NULL AND prompt <> '' THEN 'working' ELSE agent_state END, \
             agent_since = CASE WHEN agent_state IS NULL AND prompt <> '' THEN $3 ELSE agent_since END, \
             agent_by = CASE WHEN agent_state IS NULL AND prompt <> '' THEN 'launch' ELSE agent_by END \
             WHERE id = $4 AND state = 'starting' RETURNING {COLUMNS}"
        );
        let start = pid_start.and_then(|s| i64::try_from(s).ok());
        let row: Option<RunRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(pid).bind(start).bind(now).bind(id).fetch_optional(pool).await?
        });
        row.map(Run::try_from).transpose()
    }

    /// Moves a live run between `running` and `waiting` (with the reason).
    pub async fn set_live_state(
        &self,
        id: i64,
        state: RunState,
        reason: Option<&str>,
    ) -> Result<bool> {
        let _counted = self.writing(Written::Runs);
        let sql = format!(
            "UPDATE runs SET state = $1, state_reason = $2 WHERE id = $3 AND state IN {ACTIVE_STATES_SQL}"
        );
        let n = on_db!(self.db(), pool => {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(state.as_str())
                .bind(reason)
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n == 1)
    }

    /// Records a live run's agent state and keeps the run's state in step
    /// with it (`waiting` with the reason while the agent waits, `running`
    /// with the reason while its CLI retries, `running` otherwise; a `starting` run keeps its state, which the launch path
    /// moves on). `since` stays when neither state nor reason changed.
    /// False when the run is no longer live.
    pub async fn set_agent_state(
        &self,
        id: i64,
        state: AgentState,
        reason: Option<&str>,
        by: AgentBy,
    ) -> Result<bool> {
        self.set_agent_state_since(id, state, reason, by, now_ms())
            .await
    }

    /// Input lab typed (sent at `sent_at`, ms, taken before the keys went)
    /// makes the agent work from then: a state the CLI wrote down in reply
    /// (its rollout's lines carry their own time) is not older than the
    /// input's, so it is never dropped as stale.
    pub async fn working_after_input(&self, id: i64, sent_at: i64) -> Result<bool> {
        self.set_agent_state_since(id, AgentState::Working, None, AgentBy::Input, sent_at)
            .await
    }

    async fn set_agent_state_since(
        &self,
        id: i64,
        state: AgentState,
        reason: Option<&str>,
        by: AgentBy,
        now: i64,
    ) -> Result<bool> {
        let _counted = self.writing(Written::Runs);
        let (run_state, run_reason) = match state {
            AgentState::Waiting => (RunState::Waiting, reason),
            // Live, and the reason says what the CLI retries on.
            AgentState::Retrying => (RunState::Running, reason),
            _ => (RunState::Running, None),
        };
        let sql = format!(
            "UPDATE runs SET state = CASE WHEN state = 'starting' THEN state ELSE $1 END, \
             state_reason = CASE WHEN state = 'starting' THEN state_reason ELSE $2 END, \
             agent_since = CASE WHEN agent_state = $3 AND agent_reason IS NOT DISTINCT FROM $4 \
               THEN agent_since ELSE $5 END, \
             agent_state = $3, agent_reason = $4, agent_by = $6 \
             WHERE id = $7 AND state IN {ACTIVE_STATES_SQL}"
        );
        let n = on_db!(self.db(), pool => {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(run_state.as_str())
                .bind(run_reason)
                .bind(state.as_str())
                .bind(reason)
                .bind(now)
                .bind(by.as_str())
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n == 1)
    }

    /// Notes the usage-limit line lab acted on for live run `run`, or
    /// forgets it (`None`: the line left the screen).
    pub async fn set_limit_line(&self, run: i64, line: Option<&str>) -> Result<()> {
        let _counted = self.writing(Written::Runs);
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE runs SET limit_line = $1 WHERE id = $2")
                .bind(line)
                .bind(run)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Ends a live run. False when it had already ended (someone else won),
    /// or was no longer in `e.from`.
    pub async fn finish_run(&self, id: i64, e: &Ending) -> Result<bool> {
        let _counted = self.writing(Written::Runs);
        let now = now_ms();
        let from = match e.from {
            Some(st) => format!("= '{}'", st.as_str()),
            None => format!("IN {ACTIVE_STATES_SQL}"),
        };
        let sql = format!(
            "UPDATE runs SET state = $1, state_reason = $2, exit_status = $3, exit_signal = $4, ended_at = $5, \
             token_hash = NULL, stop_cause = $7 WHERE id = $6 AND state {from}"
        );
        let n = on_db!(self.db(), pool => {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(e.state.as_str())
                .bind(&e.reason)
                .bind(e.exit_status)
                .bind(e.exit_signal)
                .bind(now)
                .bind(id)
                .bind(e.stop_cause)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n == 1)
    }

    pub async fn set_run_prompt(&self, id: i64, prompt: &str) -> Result<()> {
        let _counted = self.writing(Written::Runs);
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE runs SET prompt = $1 WHERE id = $2").bind(prompt).bind(id).execute(pool).await?;
        });
        Ok(())
    }

    pub async fn mark_workspace_removed(&self, id: i64) -> Result<()> {
        let _counted = self.writing(Written::Runs);
        let now = now_ms();
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE runs SET workspace_removed_at = $1 WHERE id = $2")
                .bind(now)
                .bind(id)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Ended runs of `node` whose workspace is still there and that ended
    /// before `cutoff` (ms).
    pub async fn workspaces_to_expire(&self, node: &str, cutoff: i64) -> Result<Vec<Run>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM runs WHERE node = $1 AND state NOT IN {ACTIVE_STATES_SQL} \
             AND workspace_removed_at IS NULL AND ended_at < $2 ORDER BY id LIMIT 100"
        );
        let rows: Vec<RunRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(node).bind(cutoff).fetch_all(pool).await?
        });
        rows.into_iter().map(Run::try_from).collect()
    }

    /// Deletes an ended run. `Conflict` when it is still live.
    pub async fn delete_run(&self, id: i64) -> Result<()> {
        let _counted = self.writing(Written::Runs);
        let sql = format!("DELETE FROM runs WHERE id = $1 AND state NOT IN {ACTIVE_STATES_SQL}");
        let n = on_db!(self.db(), pool => {
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).execute(pool).await?.rows_affected()
        });
        if n == 1 {
            return Ok(());
        }
        match self.run(id).await {
            Ok(r) => Err(StoreError::Conflict(format!(
                "run {id} is {}: stop it first",
                r.state
            ))),
            Err(e) => Err(e),
        }
    }

    /// How many live runs a repo has.
    pub async fn active_runs_of_repo(&self, repo_id: i64) -> Result<i64> {
        let sql = format!(
            "SELECT COUNT(*) FROM runs WHERE repo_id = $1 AND state IN {ACTIVE_STATES_SQL}"
        );
        let (n,): (i64,) = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(repo_id).fetch_one(pool).await?
        });
        Ok(n)
    }

    /// The live run a run token belongs to.
    pub async fn run_for_token(&self, token_hash: &str) -> Result<Option<Run>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM runs WHERE token_hash = $1 AND state IN {ACTIVE_STATES_SQL}"
        );
        let row: Option<RunRow> = on_read!(self, conn => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(token_hash).fetch_optional(conn).await
        });
        row.map(Run::try_from).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::ACTIVE_STATES_SQL;
    use crate::domain::RunState;

    #[test]
    fn the_sql_list_of_live_states_is_the_live_states() {
        let live: Vec<String> = RunState::ALL
            .into_iter()
            .filter(|s| s.is_active())
            .map(|s| format!("'{s}'"))
            .collect();
        assert_eq!(ACTIVE_STATES_SQL, format!("({})", live.join(", ")));
    }
}
