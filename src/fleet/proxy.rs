//! Any node serves every run (issue 29 §2): the node a request for a run
//! reaches forwards it, signed, to the node that owns the run, and streams
//! the answer back as it comes (a live page's events too).
//!
//! Host side only: what is forwarded is an operator's request (its admin
//! token or browser session checked here first, never sent on), and what
//! comes back is the owning node's own answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;

use super::key::FleetKey;
use crate::domain::{Node, NodeState};
use crate::store::{Store, StoreError, now_ms};

/// How long the list of nodes read for forwarding is trusted.
const NODES_FOR: Duration = Duration::from_secs(1);
/// How long a node may take to accept a forwarded request's connection.
const CONNECT: Duration = Duration::from_secs(5);
/// How long it may take to begin its answer once it has the request (a
/// stop waits out the agent's grace; a remove deletes a workspace).
const ANSWER: Duration = Duration::from_secs(20);
/// How long an answer being streamed may fall silent: a live page's stream
/// says something at least every 15 s, so a peer silent for longer is gone
/// (a stopped process, a network split), and the stream ends.
const SILENT: Duration = Duration::from_secs(45);

/// Headers of a request that go on to the owning node: what its body is and
/// what answer the caller takes. Credentials (`Authorization`, `Cookie`)
/// never do, nor a form's `Origin`: the forwarding node checked it.
const FORWARDED: [header::HeaderName; 3] =
    [header::CONTENT_TYPE, header::ACCEPT, header::IF_NONE_MATCH];

/// Headers of the owning node's answer that come back: all but those of
/// its connection.
const HOP: [header::HeaderName; 5] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::CONTENT_LENGTH,
    header::UPGRADE,
    header::TE,
];

/// This node's view of the fleet, for forwarding: its key, its client, the
/// nodes and which node owns which run.
pub struct Fleet {
    me: String,
    key: FleetKey,
    store: Store,
    http: reqwest::Client,
    down_after_ms: i64,
    /// Which node owns a run: written once, when the run is made.
    owners: Mutex<HashMap<i64, String>>,
    nodes: Mutex<Option<(Instant, Arc<Vec<Node>>)>>,
}

/// Where a manual run starts (issue 29 §4).
#[derive(Debug)]
pub enum Place {
    Here,
    There(Node),
}

/// A node named for a start that cannot take it.
#[derive(Debug, thiserror::Error)]
pub enum Misplaced {
    #[error("there is no lab node '{0}' (labctl node ls lists them)")]
    Unknown(String),
    #[error("lab node '{0}' is down: it starts nothing (labctl node ls)")]
    Down(String),
    /// A start another node forwarded here names a third node: a forwarded
    /// call is answered where it lands, never forwarded again.
    #[error(
        "this is lab node '{me}', not '{named}': a start another node forwarded is never forwarded again"
    )]
    Forwarded { me: String, named: String },
}

/// A manual start another node is asked for: the fields of the API's
/// start body (`POST /api/v1/runs`).
#[derive(Debug, serde::Serialize)]
pub struct Start {
    pub repo: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub options: std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// Why another node did not start a run.
#[derive(Debug, thiserror::Error)]
pub enum StartElsewhere {
    #[error(transparent)]
    Unanswered(#[from] Unanswered),
    /// Its answer, in its words.
    #[error("{0}")]
    Refused(String),
}

/// A forwarded request that got no answer.
#[derive(Debug, thiserror::Error)]
#[error("lab node '{node}' ({url}) did not answer: {why}")]
pub struct Unanswered {
    pub node: String,
    pub url: String,
    pub why: String,
}

impl Fleet {
    /// This node's view, with the fleet's key read (or made) in `store`.
    pub async fn new(store: Store, me: &str, down_after_ms: i64) -> Result<Fleet, StoreError> {
        let key = FleetKey::new(&store.fleet_key(&crate::auth::new_token()).await?);
        Ok(Fleet {
            me: me.to_owned(),
            key,
            store,
            http: reqwest::Client::builder()
                .connect_timeout(CONNECT)
                .tcp_keepalive(Duration::from_secs(15))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("an HTTP client without extras builds"),
            down_after_ms,
            owners: Mutex::new(HashMap::new()),
            nodes: Mutex::new(None),
        })
    }

    pub fn key(&self) -> &FleetKey {
        &self.key
    }

    pub fn me(&self) -> &str {
        &self.me
    }

    /// The fleet's nodes, read at most every [`NODES_FOR`].
    pub async fn nodes(&self) -> Result<Arc<Vec<Node>>, StoreError> {
        if let Some((at, nodes)) = self.nodes.lock().expect("poisoned").as_ref()
            && at.elapsed() < NODES_FOR
        {
            return Ok(nodes.clone());
        }
        let nodes = Arc::new(self.store.nodes().await?);
        *self.nodes.lock().expect("poisoned") = Some((Instant::now(), nodes.clone()));
        Ok(nodes)
    }

    /// Node `id` when it is another node that answers (up or draining);
    /// `None` for this node, a node that is down, or one never seen.
    pub async fn other_up(&self, id: &str) -> Option<Node> {
        if id == self.me {
            return None;
        }
        let nodes = self.nodes().await.ok()?;
        nodes
            .iter()
            .find(|n| n.id == id && n.state(now_ms(), self.down_after_ms) != NodeState::Down)
            .cloned()
    }

    /// The node that owns run `run` when that is another node that answers;
    /// `None` when this node owns it, its node is down, or there is no such
    /// run (this node answers those itself).
    pub async fn remote_owner(&self, run: i64) -> Option<Node> {
        let known = self.owners.lock().expect("poisoned").get(&run).cloned();
        let owner = match known {
            Some(o) => o,
            None => {
                let node = self.store.run(run).await.ok()?.node;
                let mut owners = self.owners.lock().expect("poisoned");
                if owners.len() > 100_000 {
                    owners.clear();
                }
                owners.insert(run, node.clone());
                node
            }
        };
        self.other_up(&owner).await
    }

    /// Where a manual run starts: the node `named` (this one, or another
    /// that answers), else this node unless it is draining, else the node
    /// that takes new runs with the most memory available (none: this node,
    /// which then says it is draining). A start another node `forwarded`
    /// starts here or nowhere.
    pub async fn place(&self, named: Option<&str>, forwarded: bool) -> Result<Place, Misplaced> {
        let named = named.filter(|n| !n.is_empty());
        if forwarded {
            return match named {
                Some(id) if id != self.me => Err(Misplaced::Forwarded {
                    me: self.me.clone(),
                    named: id.to_owned(),
                }),
                _ => Ok(Place::Here),
            };
        }
        let nodes = self.nodes().await.unwrap_or_default();
        let now = now_ms();
        let state = |n: &Node| n.state(now, self.down_after_ms);
        if let Some(id) = named {
            if id == self.me {
                return Ok(Place::Here);
            }
            let n = nodes
                .iter()
                .find(|n| n.id == id)
                .ok_or_else(|| Misplaced::Unknown(id.to_owned()))?;
            if state(n) == NodeState::Down {
                return Err(Misplaced::Down(id.to_owned()));
            }
            return Ok(Place::There(n.clone()));
        }
        if !nodes.iter().any(|n| n.id == self.me && n.draining) {
            return Ok(Place::Here);
        }
        Ok(nodes
            .iter()
            .filter(|n| n.id != self.me && state(n) == NodeState::Up)
            .max_by_key(|n| n.capacity.memory_available_mb)
            .map_or(Place::Here, |n| Place::There(n.clone())))
    }

    /// Starts a run on `node` through its API: the run's id, or what that
    /// node said.
    pub async fn start_on(&self, node: &Node, start: &Start) -> Result<i64, StartElsewhere> {
        #[derive(serde::Deserialize)]
        struct Started {
            id: i64,
        }
        #[derive(serde::Deserialize)]
        struct Said {
            message: String,
        }
        #[derive(serde::Deserialize)]
        struct Failed {
            error: Said,
        }
        let json = serde_json::to_vec(start).expect("a start is JSON");
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let answer = self
            .forward(node, Method::POST, "/api/v1/runs", &h, None, json.into())
            .await?;
        let status = answer.status();
        let unanswered = |why: String| Unanswered {
            node: node.id.clone(),
            url: node.url.clone(),
            why,
        };
        let bytes = axum::body::to_bytes(answer.into_body(), 1 << 20)
            .await
            .map_err(|e| unanswered(e.to_string()))?;
        if status.is_success() {
            return serde_json::from_slice::<Started>(&bytes)
                .map(|s| s.id)
                .map_err(|e| unanswered(format!("its answer is not a run: {e}")).into());
        }
        let why = serde_json::from_slice::<Failed>(&bytes)
            .map(|f| f.error.message)
            .unwrap_or_else(|_| format!("it answered {status}"));
        Err(StartElsewhere::Refused(format!(
            "lab node '{}': {why}",
            node.id
        )))
    }

    /// Sends `method` `path` (with its query) to `node`, signed, acting for
    /// browser session `session` when given, with `headers`' content headers
    /// and `body`; its answer, streamed.
    pub async fn forward(
        &self,
        node: &Node,
        method: Method,
        path: &str,
        headers: &HeaderMap,
        session: Option<&str>,
        body: Bytes,
    ) -> Result<Response, Unanswered> {
        let unanswered = |why: String| Unanswered {
            node: node.id.clone(),
            url: node.url.clone(),
            why,
        };
        let url = reqwest::Url::parse(&format!("{}{path}", node.url.trim_end_matches('/')))
            .map_err(|e| unanswered(format!("its address does not make a URL: {e}")))?;
        // What is signed is what goes on the wire: the URL parser may have
        // encoded a character of the path or query the caller sent raw.
        let sent = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        let mut out = self
            .key
            .sign(&self.me, &node.id, now_ms(), &method, &sent, session, &body);
        for name in FORWARDED {
            if let Some(v) = headers.get(&name) {
                out.insert(name, v.clone());
            }
        }
        let answer = tokio::time::timeout(
            ANSWER,
            self.http
                .request(method, url)
                .headers(out)
                .body(body)
                .send(),
        )
        .await
        .map_err(|_| unanswered(format!("no answer within {} s", ANSWER.as_secs())))?
        .map_err(|e| unanswered(e.to_string()))?;
        if answer.status() == reqwest::StatusCode::UNAUTHORIZED
            && answer.headers().contains_key(super::key::REFUSED)
        {
            // Its refusal of this node's credential is the fleet's failure,
            // not the caller's token's.
            let why = answer
                .headers()
                .get(super::key::REFUSED)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("refused")
                .to_owned();
            let hint = if why == "stale" {
                "; are the two machines' clocks more than 30 s apart?"
            } else {
                ""
            };
            return Err(unanswered(format!(
                "it refused this node's credential as {why}{hint}"
            )));
        }
        let status =
            StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut back = Response::builder().status(status);
        for (name, value) in answer.headers() {
            if !HOP.contains(name) {
                back = back.header(name, value);
            }
        }
        let chunks = futures_util::stream::unfold(Some(answer), |answer| async move {
            let mut answer = answer?;
            match tokio::time::timeout(SILENT, answer.chunk()).await {
                Ok(Ok(Some(bytes))) => Some((Ok(bytes), Some(answer))),
                Ok(Ok(None)) => None,
                Ok(Err(e)) => Some((Err(std::io::Error::other(e)), None)),
                Err(_) => Some((
                    Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the node owning the run fell silent",
                    )),
                    None,
                )),
            }
        });
        Ok(back
            .header(
                "x-lab-served-by",
                HeaderValue::from_str(&node.id).unwrap_or(HeaderValue::from_static("?")),
            )
            .body(Body::from_stream(chunks))
            .expect("a response of a valid status and headers builds"))
    }
}
