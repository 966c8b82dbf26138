//! labctl's HTTP client: where lab is, which token to send, and what a
//! failed request means as an exit code.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::http::error::ErrorBody;

/// A failure labctl reports, with the exit code that says what kind.
#[derive(Debug)]
pub struct CliError {
    pub code: Exit,
    pub message: String,
}

/// labctl's exit codes (documented in docs/labctl.md and `labctl --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Something else failed (a server error, a local IO error).
    Failure = 1,
    /// Usage error: clap reports these itself.
    Usage = 2,
    /// The repo, run or issue named does not exist.
    NotFound = 3,
    /// The request conflicts with the current state (a taken name, a live run).
    Conflict = 4,
    /// A value was rejected; the message says which and what is allowed.
    Invalid = 5,
    /// No valid token, or the token does not reach this.
    Auth = 6,
    /// lab could not be reached.
    Unreachable = 7,
}

impl Exit {
    /// Its name in a JSON error.
    pub fn name(self) -> &'static str {
        match self {
            Exit::Failure => "failure",
            Exit::Usage => "usage",
            Exit::NotFound => "not_found",
            Exit::Conflict => "conflict",
            Exit::Invalid => "invalid",
            Exit::Auth => "auth",
            Exit::Unreachable => "unreachable",
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

impl CliError {
    pub fn new(code: Exit, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
        }
    }

    /// An exit code with nothing more to say (what was printed said it).
    pub fn quiet(code: Exit) -> Self {
        CliError {
            code,
            message: String::new(),
        }
    }

    pub fn failure(message: impl Into<String>) -> Self {
        Self::new(Exit::Failure, message)
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Exit::Invalid, message)
    }
}

pub type CliResult<T> = Result<T, CliError>;

/// How labctl reaches lab.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    /// How long a request may take, answer included (`LAB_TIMEOUT`); `None`
    /// waits as long as lab takes.
    timeout: Option<Duration>,
}

/// How long a call that launches a run may take: the first start of a repo
/// given by URL clones it (lab gives a clone 5 minutes).
pub const LAUNCH_WAIT: Duration = Duration::from_secs(6 * 60);

/// A request body with nothing in it: `{}`.
#[derive(Serialize)]
pub struct EmptyObject {}

/// The data dir labctl reads the admin token from, when `LAB_TOKEN` is unset.
fn data_dir() -> PathBuf {
    std::env::var_os("LAB_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(crate::server::default_data_dir)
}

/// The admin token of a lab on this machine (its data dir's `token`).
pub fn local_token() -> Option<String> {
    std::fs::read_to_string(data_dir().join("token"))
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

impl Client {
    pub fn new(url: &str, token: Option<String>, timeout: Option<Duration>) -> CliResult<Client> {
        crate::init_tls();
        let token = token.filter(|t| !t.is_empty()).or_else(local_token);
        let http = reqwest::Client::builder()
            .user_agent(concat!("labctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CliError::failure(format!("cannot set up HTTP: {e}")))?;
        Ok(Client {
            http,
            base: url.trim_end_matches('/').to_owned(),
            token,
            timeout,
        })
    }

    /// This client, waiting at least `at_least` for an answer (unless it
    /// waits without limit already).
    pub fn patient(&self, at_least: Duration) -> Client {
        let mut c = self.clone();
        c.timeout = c.timeout.map(|t| t.max(at_least));
        c
    }

    /// This client, waiting without limit: for following a run's output,
    /// which lasts as long as the run.
    pub fn unbounded(&self) -> Client {
        let mut c = self.clone();
        c.timeout = None;
        c
    }

    /// The error of a request that got no answer in time.
    fn timed_out(&self) -> CliError {
        let secs = self.timeout.map_or(0, |t| t.as_secs());
        CliError::new(
            Exit::Unreachable,
            format!(
                "lab at {} did not answer within {secs} s; what was asked may still be under way \
                 (LAB_TIMEOUT or --timeout sets the limit in seconds, 0 for none)",
                self.base
            ),
        )
    }

    /// A failure while reading an answer's body.
    pub fn reading(&self, e: &reqwest::Error, what: &str) -> CliError {
        if e.is_timeout() {
            return self.timed_out();
        }
        CliError::failure(format!("{what}: {e}"))
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut rb = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = self.timeout {
            rb = rb.timeout(t);
        }
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// A GET request, to send with [`Client::raw`].
    pub fn request_get(&self, path: &str) -> reqwest::RequestBuilder {
        self.request(Method::GET, path)
    }

    /// GETs `path` and decodes lab's answer as `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> CliResult<T> {
        self.send(self.request(Method::GET, path)).await
    }

    pub async fn get_text(&self, path: &str) -> CliResult<String> {
        let resp = self.raw(self.request(Method::GET, path)).await?;
        resp.text()
            .await
            .map_err(|e| self.reading(&e, "reading the response"))
    }

    /// POSTs `body` as JSON and decodes lab's answer as `T`.
    pub async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> CliResult<T> {
        self.send(self.request(Method::POST, path).json(body)).await
    }

    /// POSTs to a route that reads no body (an action such as stop or
    /// pause); the body sent is JSON `null`, as labctl always sent.
    pub async fn post_empty<T: DeserializeOwned>(&self, path: &str) -> CliResult<T> {
        self.post(path, &()).await
    }

    /// PATCHes `body` as JSON and decodes lab's answer as `T`.
    pub async fn patch<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> CliResult<T> {
        self.send(self.request(Method::PATCH, path).json(body))
            .await
    }

    /// DELETEs `path`; lab answers 204, with nothing to read.
    pub async fn delete(&self, path: &str) -> CliResult<()> {
        self.send(self.request(Method::DELETE, path)).await
    }

    /// Sends and checks the status; the body of a success.
    pub async fn raw(&self, rb: reqwest::RequestBuilder) -> CliResult<reqwest::Response> {
        let resp = rb.send().await.map_err(|e| {
            if e.is_timeout() {
                return self.timed_out();
            }
            CliError::new(
                Exit::Unreachable,
                format!(
                    "cannot reach lab at {}: {}\n(is `lab serve` running? LAB_URL sets where labctl looks)",
                    self.base,
                    root_cause(&e)
                ),
            )
        })?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        // Anything but lab's own error body (a proxy's page) says only its
        // status.
        let body: Option<ErrorBody> = resp.json().await.ok();
        Err(api_error(status, body, self.token.is_none()))
    }

    /// Sends, checks the status and decodes the body as `T`. An answer
    /// without a body (204, 202) is read as JSON `null`: `()` or an
    /// `Option` takes it, a body type does not.
    async fn send<T: DeserializeOwned>(&self, rb: reqwest::RequestBuilder) -> CliResult<T> {
        const UNREADABLE: &str = "lab sent a response labctl cannot read";
        let resp = self.raw(rb).await?;
        let body = if matches!(resp.status(), StatusCode::NO_CONTENT | StatusCode::ACCEPTED) {
            None
        } else {
            Some(
                resp.bytes()
                    .await
                    .map_err(|e| self.reading(&e, UNREADABLE))?,
            )
        };
        decode(body.as_deref().unwrap_or(b"null"))
            .map_err(|e| CliError::failure(format!("{UNREADABLE}: {e}")))
    }
}

/// An answer's body as `T`.
pub(super) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, serde_json::Error> {
    serde_json::from_slice(body)
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

fn api_error(status: StatusCode, body: Option<ErrorBody>, no_token: bool) -> CliError {
    let message = body
        .map(|b| b.error.message)
        .unwrap_or_else(|| format!("lab answered {status}"));
    let code = match status {
        StatusCode::NOT_FOUND => Exit::NotFound,
        StatusCode::CONFLICT => Exit::Conflict,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Exit::Auth,
        s if s.is_client_error() => Exit::Invalid,
        _ => Exit::Failure,
    };
    let mut message = message;
    if status == StatusCode::UNAUTHORIZED && no_token {
        message.push_str("\n(no token: set LAB_TOKEN, or LAB_DATA_DIR to the server's data dir)");
    }
    CliError::new(code, message)
}

/// Percent-encodes one path segment (a repo name, a run id).
pub fn seg(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::error::ErrorDetail;

    fn body(code: &str, message: &str) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: code.into(),
                message: message.into(),
                field: None,
                value: None,
                allowed: None,
                errors: Vec::new(),
            },
        }
    }

    /// lab's error body gives the message; the status gives the exit code.
    #[test]
    fn an_error_answer_becomes_an_exit_code_and_lab_s_message() {
        let e = api_error(
            StatusCode::NOT_FOUND,
            Some(body("not_found", "repo 'x' not found")),
            false,
        );
        assert_eq!(
            (e.code, e.message.as_str()),
            (Exit::NotFound, "repo 'x' not found")
        );
        let e = api_error(StatusCode::CONFLICT, Some(body("paused", "paused")), false);
        assert_eq!(e.code, Exit::Conflict);
        let e = api_error(StatusCode::BAD_REQUEST, Some(body("invalid", "bad")), false);
        assert_eq!(e.code, Exit::Invalid);
        let e = api_error(StatusCode::BAD_GATEWAY, None, false);
        assert_eq!(
            (e.code, e.message.as_str()),
            (Exit::Failure, "lab answered 502 Bad Gateway")
        );
        let e = api_error(
            StatusCode::UNAUTHORIZED,
            Some(body("unauthorized", "no")),
            true,
        );
        assert_eq!(e.code, Exit::Auth);
        assert!(e.message.starts_with("no\n(no token"), "{}", e.message);
    }
}
