//! `GET /api/v1/status`: this node, its tmux server and its reconcile loop.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

#[derive(Serialize, ToSchema)]
pub struct StatusBody {
    pub version: &'static str,
    /// This node's id; runs record the node that owns their session.
    pub node: String,
    /// `sqlite` or `postgres`.
    pub database: &'static str,
    pub tmux_socket: String,
    /// tmux client processes lab has started since it started.
    pub tmux_calls: u64,
    /// Reconcile passes since lab started.
    pub reconcile_passes: usize,
    /// AFK scheduler ticks this node finished since it started.
    pub afk_ticks: u64,
    /// AFK settles (a tick's included) this node finished since it started:
    /// each looks at this node's claims once.
    pub afk_settles: u64,
    /// Sessions on lab's tmux socket that no run owns.
    pub stray_sessions: Vec<String>,
    pub last_pass: Option<PassBody>,
    pub cache: CacheBody,
    pub relay: RelayBody,
    pub notifications: NotifyLoopBody,
    /// What confines runs on this node (ADR 24).
    pub sandbox: SandboxBody,
    /// Each forge repo's account lab's token acts as, as far as read
    /// (`lab doctor` reads each and checks its permissions).
    pub forges: Vec<ForgeAccountBody>,
}

/// The forge account lab acts as for one repo.
#[derive(Serialize, ToSchema)]
pub struct ForgeAccountBody {
    pub repo: String,
    /// `null` until lab has read it (`GET /user`).
    pub identity: Option<crate::issues::ForgeIdentity>,
}

/// What is in force for this node's runs.
#[derive(Serialize, ToSchema)]
pub struct SandboxBody {
    /// `deny-by-default` (the system's folders, the CLI, the repo's objects,
    /// the run's own folders; nothing else of the host) or `none` (no
    /// sandbox here: `lab doctor` says why).
    pub view: &'static str,
    /// The user id agents have in their sandbox (not root); `null` when
    /// they run without a user namespace of their own (lab's own user id).
    pub uid: Option<u32>,
    /// `v2`, `v1` or `none`: how runs' memory and processes are capped.
    pub cgroups: &'static str,
    /// Why runs are not capped, when `cgroups` is `none`.
    pub cgroups_why: Option<String>,
}

/// The loop that delivers notifications.
#[derive(Serialize, ToSchema)]
pub struct NotifyLoopBody {
    /// Times it read the outbox since lab started (after a write of this
    /// node's, when a pending row came due, or every 10 s).
    pub reads: u64,
    /// Attempts it started since lab started (a row sent to its endpoint).
    pub attempts: u64,
    /// Attempts over, their answer recorded.
    pub attempts_ended: u64,
    /// Rows of the outbox (any node's) neither delivered nor given up;
    /// `null` when the outbox could not be read.
    pub pending: Option<i64>,
}

/// The relay that copies the runs' output to their panes and logs (ADR 22).
#[derive(Serialize, ToSchema)]
pub struct RelayBody {
    /// Off with `--no-relay`: every run's shim copies its own output.
    pub enabled: bool,
    /// Whether a relay runs now. lab starts one with the next run when
    /// none does; runs started before it ended copy their own.
    pub running: bool,
    pub socket: String,
}

/// The in-memory cache of resolve inputs and settings (ADR 11).
#[derive(Serialize, ToSchema)]
pub struct CacheBody {
    /// Off while a PostgreSQL node cannot hear other nodes' writes: every
    /// read then goes to the database.
    pub on: bool,
    /// Reads of a repo with its global defaults (resolve, run starts).
    pub repos: CountsBody,
    /// Reads of the global settings.
    pub settings: CountsBody,
}

/// Reads since lab started.
#[derive(Serialize, ToSchema)]
pub struct CountsBody {
    /// Answered from the cache.
    pub hits: u64,
    /// Gone to the database.
    pub misses: u64,
}

impl From<crate::store::Counts> for CountsBody {
    fn from(c: crate::store::Counts) -> Self {
        CountsBody {
            hits: c.hits,
            misses: c.misses,
        }
    }
}

/// The last reconcile pass.
#[derive(Serialize, ToSchema)]
pub struct PassBody {
    /// Live runs of this node it looked at.
    pub runs: usize,
    /// tmux client processes it started.
    pub tmux_calls: u64,
    pub elapsed_ms: f64,
    /// Whether it read the runs and the panes; a screens pass read the
    /// screens of runs whose output grew, from what the last full pass
    /// read.
    pub full: bool,
    /// Whether it left something to look at again soon (a run starting, a
    /// screen behind its log, …): the loop then passes again after
    /// `--reconcile-ms`; else it sleeps until something changes.
    pub soon: bool,
}

/// What this lab node is and how its run supervision is doing.
#[utoipa::path(get, path = "/status", tag = "status", responses((status = 200, body = StatusBody)))]
async fn status(State(app): State<AppState>) -> Json<StatusBody> {
    let r = &app.runner;
    let sandboxed = r.cfg().sandbox.bwrap().is_some();
    let sandbox = SandboxBody {
        view: if sandboxed { "deny-by-default" } else { "none" },
        uid: (sandboxed && r.cfg().sandbox_policy.userns).then_some(crate::run::sandbox::AGENT_UID),
        cgroups: r.cfg().cgroups.kind(),
        cgroups_why: match &r.cfg().cgroups {
            crate::run::cgroup::Cgroups::None { why } => Some(why.clone()),
            _ => None,
        },
    };
    let forges = app
        .store
        .repos()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|repo| repo.issues.source != crate::repo::issue_source::SourceKind::Builtin)
        .map(|repo| ForgeAccountBody {
            identity: app.scheduler.sources().known_identity(&repo),
            repo: repo.name,
        })
        .collect();
    Json(StatusBody {
        forges,
        sandbox,
        version: env!("CARGO_PKG_VERSION"),
        node: r.node().to_owned(),
        database: app.store.backend(),
        tmux_socket: r.tmux().socket().to_string_lossy().into_owned(),
        tmux_calls: r.tmux().calls(),
        reconcile_passes: r.passes(),
        afk_ticks: app.scheduler.ticks(),
        afk_settles: app.scheduler.settles(),
        stray_sessions: r.strays(),
        last_pass: r.last_pass().map(|p| PassBody {
            runs: p.checked,
            tmux_calls: p.tmux_calls,
            elapsed_ms: p.elapsed.as_secs_f64() * 1e3,
            full: p.full,
            soon: p.soon,
        }),
        cache: {
            let c = app.store.cache_stats();
            CacheBody {
                on: c.on,
                repos: c.repos.into(),
                settings: c.settings.into(),
            }
        },
        relay: RelayBody {
            enabled: r.relay().enabled(),
            running: r.relay().running(),
            socket: r.relay().socket().to_string_lossy().into_owned(),
        },
        notifications: {
            let c = app.notifier.counts();
            NotifyLoopBody {
                reads: c.reads,
                attempts: c.attempts,
                attempts_ended: c.ended,
                pending: app.store.pending_notifications().await.ok(),
            }
        },
    })
}

#[derive(Serialize, serde::Deserialize, ToSchema)]
pub struct DoctorBody {
    /// The worst level found: `ok`, `warn` or `error`.
    pub worst: crate::doctor::Level,
    pub findings: Vec<crate::doctor::Finding>,
}

/// `lab doctor`, run by this server: tmux, git, data dir, database, and each
/// provider's CLI (version, and whether it accepts lab's command line).
#[utoipa::path(get, path = "/doctor", tag = "status", responses((status = 200, body = DoctorBody)))]
async fn doctor(State(app): State<AppState>) -> Json<DoctorBody> {
    let findings = crate::doctor::diagnose(&app.runner, app.scheduler.sources()).await;
    Json(DoctorBody {
        worst: crate::doctor::worst(&findings),
        findings,
    })
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(status))
        .routes(routes!(doctor))
}
