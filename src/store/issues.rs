//! The built-in tracker's rows: issues, their labels and comments, pulls.

use sqlx::FromRow;

use super::{Db, Result, Store, StoreError, now_ms, on_db};
use crate::domain::IssueState;

/// An issue as the built-in tracker stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueRow {
    pub number: i64,
    pub title: String,
    pub body: String,
    pub state: IssueState,
    pub labels: Vec<String>,
    pub created_at: i64,
    /// The issue's directives as set (issue 27), canonical: checked against
    /// its repo when set, and again when it is claimed.
    pub knobs: serde_json::Map<String, serde_json::Value>,
}

#[derive(FromRow)]
struct Row {
    number: i64,
    title: String,
    body: String,
    state: IssueState,
    created_at: i64,
    knobs: String,
}

#[derive(FromRow)]
struct ListedRow {
    number: i64,
    title: String,
    body: String,
    state: IssueState,
    created_at: i64,
    labels: String,
    knobs: String,
}

fn knobs_object(json: &str) -> Result<serde_json::Map<String, serde_json::Value>> {
    serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("issues.knobs: {e}")))
}

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct CommentRow {
    pub author: String,
    pub body: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct PullRow {
    pub number: i64,
    pub title: String,
    pub body: String,
    pub head_branch: String,
    pub base_branch: String,
    pub issue_number: Option<i64>,
    pub run_id: Option<i64>,
    pub url: String,
    pub state: String,
    pub created_at: i64,
}

const PULL_COLUMNS: &str =
    "number, title, body, head_branch, base_branch, issue_number, run_id, url, state, created_at";

/// A pull request about to be recorded.
pub struct NewPullRow<'a> {
    pub title: &'a str,
    pub body: &'a str,
    pub head: &'a str,
    pub base: &'a str,
    pub issue: Option<i64>,
    pub run_id: Option<i64>,
    /// Made from the number once it is known.
    pub url: &'a (dyn Fn(i64) -> String + Sync),
}

impl Store {
    /// Opens an issue with the next number of the repo.
    pub async fn create_issue(
        &self,
        repo_id: i64,
        title: &str,
        body: &str,
        labels: &[String],
        knobs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<IssueRow> {
        let now = now_ms();
        let knobs_text = serde_json::to_string(knobs).unwrap_or_else(|_| "{}".to_owned());
        // The number is computed inside the insert; two writers racing for
        // it collide on the unique index, and the loser takes the next one.
        for _ in 0..5 {
            let inserted: std::result::Result<(i64, i64), sqlx::Error> = on_db!(self.db(), pool => {
                sqlx::query_as(
                    "INSERT INTO issues (repo_id, number, title, body, state, created_at, updated_at, knobs) \
                     SELECT $1, COALESCE(MAX(number), 0) + 1, $2, $3, $4, $5, $5, $6 FROM issues WHERE repo_id = $1 \
                     RETURNING id, number",
                )
                .bind(repo_id)
                .bind(title)
                .bind(body)
                .bind(IssueState::Open)
                .bind(now)
                .bind(&knobs_text)
                .fetch_one(pool)
                .await
            });
            match inserted {
                Ok((id, number)) => {
                    for l in labels {
                        on_db!(self.db(), pool => {
                            sqlx::query("INSERT INTO issue_labels (issue_id, label) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                                .bind(id)
                                .bind(l)
                                .execute(pool)
                                .await?;
                        });
                    }
                    return Ok(IssueRow {
                        number,
                        title: title.to_owned(),
                        body: body.to_owned(),
                        state: IssueState::Open,
                        labels: labels.to_vec(),
                        created_at: now,
                        knobs: knobs.clone(),
                    });
                }
                Err(sqlx::Error::Database(d)) if d.is_unique_violation() => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Conflict(
            "could not number a new issue; try again".into(),
        ))
    }

    /// Issues of a repo, optionally only those with a label or in a state.
    pub async fn issues(
        &self,
        repo_id: i64,
        label: Option<&str>,
        state: Option<IssueState>,
    ) -> Result<Vec<IssueRow>> {
        let mut cond = String::from("i.repo_id = $1");
        if label.is_some() {
            cond.push_str(" AND EXISTS (SELECT 1 FROM issue_labels f WHERE f.issue_id = i.id AND f.label = $2)");
        }
        if state.is_some() {
            cond.push_str(if label.is_some() {
                " AND i.state = $3"
            } else {
                " AND i.state = $2"
            });
        }
        // Each issue's labels come in its own row, as a JSON array: one query,
        // one row per issue (rows, not bytes, are what a listing pays for).
        let labels = match self.db() {
            Db::Sqlite(_) => {
                "(SELECT json_group_array(label) FROM \
                 (SELECT label FROM issue_labels WHERE issue_id = i.id ORDER BY label))"
            }
            Db::Pg(_) => {
                "(SELECT COALESCE(json_agg(label ORDER BY label), '[]')::text \
                 FROM issue_labels WHERE issue_id = i.id)"
            }
        };
        let sql = format!(
            "SELECT i.number, i.title, i.body, i.state, i.created_at, {labels} AS labels, i.knobs \
             FROM issues i WHERE {cond} ORDER BY i.number"
        );
        let rows: Vec<ListedRow> = on_db!(self.db(), pool => {
            let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(repo_id);
            if let Some(l) = label {
                q = q.bind(l);
            }
            if let Some(s) = state {
                q = q.bind(s);
            }
            q.fetch_all(pool).await?
        });
        rows.into_iter()
            .map(|r| {
                let labels: Vec<String> = serde_json::from_str(&r.labels).map_err(|e| {
                    StoreError::Corrupt(format!("labels of issue {}: {e}", r.number))
                })?;
                Ok(IssueRow {
                    labels,
                    number: r.number,
                    title: r.title,
                    body: r.body,
                    state: r.state,
                    created_at: r.created_at,
                    knobs: knobs_object(&r.knobs)?,
                })
            })
            .collect()
    }

    async fn issue_id(&self, repo_id: i64, number: i64) -> Result<i64> {
        let id: Option<(i64,)> = on_db!(self.db(), pool => {
            sqlx::query_as("SELECT id FROM issues WHERE repo_id = $1 AND number = $2")
                .bind(repo_id)
                .bind(number)
                .fetch_optional(pool)
                .await?
        });
        id.map(|(i,)| i).ok_or(StoreError::NotFound)
    }

    /// One issue, and its comments.
    pub async fn issue(&self, repo_id: i64, number: i64) -> Result<(IssueRow, Vec<CommentRow>)> {
        let id = self.issue_id(repo_id, number).await?;
        let (row, labels, comments) = on_db!(self.db(), pool => {
            let row: Row = sqlx::query_as("SELECT number, title, body, state, created_at, knobs FROM issues WHERE id = $1")
                .bind(id)
                .fetch_one(pool)
                .await?;
            let labels: Vec<(String,)> = sqlx::query_as("SELECT label FROM issue_labels WHERE issue_id = $1 ORDER BY label")
                .bind(id)
                .fetch_all(pool)
                .await?;
            let comments: Vec<CommentRow> =
                sqlx::query_as("SELECT author, body, created_at FROM issue_comments WHERE issue_id = $1 ORDER BY id")
                    .bind(id)
                    .fetch_all(pool)
                    .await?;
            (row, labels, comments)
        });
        Ok((
            IssueRow {
                number: row.number,
                title: row.title,
                body: row.body,
                state: row.state,
                labels: labels.into_iter().map(|(l,)| l).collect(),
                created_at: row.created_at,
                knobs: knobs_object(&row.knobs)?,
            },
            comments,
        ))
    }

    /// Replaces an issue's directives (issue 27), unless an AFK run has
    /// claimed it: a claimed issue's directives are what its run works
    /// with (`Conflict`). `NotFound` when there is no such issue.
    pub async fn set_issue_knobs(
        &self,
        repo_id: i64,
        number: i64,
        knobs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        let id = self.issue_id(repo_id, number).await?;
        let text = serde_json::to_string(knobs).unwrap_or_else(|_| "{}".to_owned());
        let changed = on_db!(self.db(), pool => {
            sqlx::query(
                "UPDATE issues SET knobs = $1, updated_at = $2 WHERE id = $3 AND NOT EXISTS \
                 (SELECT 1 FROM afk_claims c WHERE c.repo_id = $4 AND c.issue_number = $5 AND c.active)",
            )
            .bind(&text)
            .bind(now_ms())
            .bind(id)
            .bind(repo_id)
            .bind(number)
            .execute(pool)
            .await?
            .rows_affected()
        });
        if changed == 1 {
            Ok(())
        } else {
            Err(StoreError::Conflict(format!(
                "issue {number} is claimed by an AFK run: its knobs are what that run works with; \
                 change them once the run has ended"
            )))
        }
    }

    pub async fn comment_issue(
        &self,
        repo_id: i64,
        number: i64,
        author: &str,
        body: &str,
    ) -> Result<()> {
        let id = self.issue_id(repo_id, number).await?;
        on_db!(self.db(), pool => {
            sqlx::query("INSERT INTO issue_comments (issue_id, author, body, created_at) VALUES ($1, $2, $3, $4)")
                .bind(id)
                .bind(author)
                .bind(body)
                .bind(now_ms())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Removes one label and adds another (either may be empty).
    pub async fn relabel_issue(
        &self,
        repo_id: i64,
        number: i64,
        remove: &str,
        add: &str,
    ) -> Result<()> {
        let id = self.issue_id(repo_id, number).await?;
        on_db!(self.db(), pool => {
            sqlx::query("DELETE FROM issue_labels WHERE issue_id = $1 AND label = $2").bind(id).bind(remove).execute(pool).await?;
            if !add.is_empty() {
                sqlx::query("INSERT INTO issue_labels (issue_id, label) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                    .bind(id)
                    .bind(add)
                    .execute(pool)
                    .await?;
            }
            sqlx::query("UPDATE issues SET updated_at = $1 WHERE id = $2").bind(now_ms()).bind(id).execute(pool).await?;
        });
        Ok(())
    }

    pub async fn set_issue_state(
        &self,
        repo_id: i64,
        number: i64,
        state: IssueState,
    ) -> Result<()> {
        let id = self.issue_id(repo_id, number).await?;
        on_db!(self.db(), pool => {
            sqlx::query("UPDATE issues SET state = $1, updated_at = $2 WHERE id = $3")
                .bind(state)
                .bind(now_ms())
                .bind(id)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Records a pull request with the next number of the repo.
    pub async fn create_pull(&self, repo_id: i64, p: &NewPullRow<'_>) -> Result<PullRow> {
        let now = now_ms();
        for _ in 0..5 {
            let inserted: std::result::Result<(i64,), sqlx::Error> = on_db!(self.db(), pool => {
                sqlx::query_as(
                    "INSERT INTO pulls (repo_id, number, title, body, head_branch, base_branch, issue_number, run_id, url, \
                     state, created_at) SELECT $1, COALESCE(MAX(number), 0) + 1, $2, $3, $4, $5, $6, $7, '', 'open', $8 \
                     FROM pulls WHERE repo_id = $1 RETURNING number",
                )
                .bind(repo_id)
                .bind(p.title)
                .bind(p.body)
                .bind(p.head)
                .bind(p.base)
                .bind(p.issue)
                .bind(p.run_id)
                .bind(now)
                .fetch_one(pool)
                .await
            });
            match inserted {
                Ok((number,)) => {
                    let url = (p.url)(number);
                    on_db!(self.db(), pool => {
                        sqlx::query("UPDATE pulls SET url = $1 WHERE repo_id = $2 AND number = $3")
                            .bind(&url)
                            .bind(repo_id)
                            .bind(number)
                            .execute(pool)
                            .await?;
                    });
                    return Ok(PullRow {
                        number,
                        title: p.title.to_owned(),
                        body: p.body.to_owned(),
                        head_branch: p.head.to_owned(),
                        base_branch: p.base.to_owned(),
                        issue_number: p.issue,
                        run_id: p.run_id,
                        url,
                        state: "open".into(),
                        created_at: now,
                    });
                }
                Err(sqlx::Error::Database(d)) if d.is_unique_violation() => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Conflict(
            "could not number a new pull request; try again".into(),
        ))
    }

    /// The URL of the pull request a run opened in the built-in tracker.
    pub async fn pull_of_run(&self, run_id: i64) -> Result<Option<String>> {
        let row: Option<(String,)> = on_db!(self.db(), pool => {
            sqlx::query_as("SELECT url FROM pulls WHERE run_id = $1 ORDER BY number LIMIT 1")
                .bind(run_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(|(u,)| u))
    }

    pub async fn pulls(&self, repo_id: i64) -> Result<Vec<PullRow>> {
        let sql = format!("SELECT {PULL_COLUMNS} FROM pulls WHERE repo_id = $1 ORDER BY number");
        Ok(on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(repo_id).fetch_all(pool).await?
        }))
    }

    /// One pull request of a repo; `NotFound` when it has no such number.
    pub async fn pull(&self, repo_id: i64, number: i64) -> Result<PullRow> {
        let sql = format!("SELECT {PULL_COLUMNS} FROM pulls WHERE repo_id = $1 AND number = $2");
        let row: Option<PullRow> = on_db!(self.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(repo_id)
                .bind(number)
                .fetch_optional(pool)
                .await?
        });
        row.ok_or(StoreError::NotFound)
    }
}
