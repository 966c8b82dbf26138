//! Listings of every page, and where the next page is.
//!
//! GitHub: the `rel="next"` of the `Link` header (docs: "Using pagination in
//! the REST API"); it may name another path (`/repositories/{id}/…`).
//! Gitea/Forgejo: page numbers. Gitea caps a page at `[api]
//! MAX_RESPONSE_ITEMS` (default 50, `modules/setting/api.go`), may be set
//! lower, and some listings send no `Link` at all (`GET
//! /repos/{o}/{r}/labels` sets only `X-Total-Count`,
//! `routers/api/v1/repo/label.go`); the `Link` it does send is built from
//! its `ROOT_URL`, which need not be the URL lab reaches it at. So lab
//! counts pages itself there, and stops at `X-Total-Count`, at an empty
//! page, or (without a count) at a page shorter than the first.
//!
//! Invariant: lab only sends a request (and so its token) to the configured
//! forge's origin; a `Link` on another origin is rebuilt on it.

use reqwest::{Method, Url};
use serde::de::DeserializeOwned;

use super::Forge;
use super::http::read;
use crate::issues::{Result, SourceError};
use crate::repo::issue_source::SourceKind;

/// How many items a page asks for.
pub const PAGE: usize = 50;

/// Pages lab reads of one listing at most (5 000 items).
const MAX_PAGES: usize = 100;

/// The `rel="next"` link of a `Link` header.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, rel) = part.split_once(';')?;
        rel.contains("rel=\"next\"").then(|| {
            url.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_owned()
        })
    })
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// Where lab asks for the page a `Link` names: the link itself when it is on
/// the forge's origin, else the page lab just read with the link's query
/// (its page or cursor) on the forge's origin.
pub fn on_origin(forge: &Url, current: &Url, link: &str) -> Option<Url> {
    let next = current.join(link).ok()?;
    if same_origin(forge, &next) {
        return Some(next);
    }
    let mut rebuilt = current.clone();
    rebuilt.set_query(next.query());
    Some(rebuilt)
}

fn with_page(url: &Url, page: usize) -> Url {
    let mut u = url.clone();
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| k != "page")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    u.query_pairs_mut()
        .clear()
        .extend_pairs(pairs)
        .append_pair("page", &page.to_string());
    u
}

impl Forge {
    /// Every page of a listing that starts at `first` (on the forge).
    pub(super) async fn all<T: DeserializeOwned>(&self, first: String) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.pages(first, |items: Vec<T>| {
            out.extend(items);
            true
        })
        .await?;
        Ok(out)
    }

    /// Reads the pages of a listing in turn, handing each to `each`, until
    /// the last one or until `each` says to stop.
    pub(super) async fn pages<T: DeserializeOwned>(
        &self,
        first: String,
        mut each: impl FnMut(Vec<T>) -> bool,
    ) -> Result<()> {
        let bad = |e| SourceError::Forge(format!("lab cannot page the forge's listing: {e}"));
        let origin = Url::parse(&self.api).map_err(bad)?;
        let start = Url::parse(&first).map_err(bad)?;
        let mut url = with_page(&start, 1);
        let mut seen = 0;
        let mut first_len = None;
        for page in 1..=MAX_PAGES {
            let resp = self.send(self.req(Method::GET, url.as_str())).await?;
            let h = resp.headers();
            let total = h
                .get("x-total-count")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<usize>().ok());
            let link = h
                .get("link")
                .and_then(|v| v.to_str().ok())
                .and_then(next_link);
            let items: Vec<T> = read(resp).await?;
            let n = items.len();
            seen += n;
            let short = first_len.is_some_and(|f| n < f);
            first_len.get_or_insert(n);
            if !each(items) {
                break;
            }
            let next = match self.kind {
                SourceKind::Github => link.and_then(|l| on_origin(&origin, &url, &l)),
                _ if n == 0 || short || total.is_some_and(|t| seen >= t) => None,
                _ => Some(with_page(&start, page + 1)),
            };
            match next {
                Some(u) => url = u,
                None => break,
            }
        }
        Ok(())
    }
}
