//! Requests shaped as GitHub's REST API documents them (`Accept: application/vnd.github+json`,
//! `X-GitHub-Api-Version`, Bearer token) over the shared HTTP client: conditional single reads
//! through an ETag cache, `Link`-paged lists with a page cap, the GraphQL endpoint, and writes
//! (never retried: the client retries only reads).

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::clock::Clock;
use crate::http_client::{
    ClientOptions, ErrorClass, EtagCache, HttpClient, HttpError, HttpTuning, Request, Response,
    ThreadSleeper, collect_link_pages, encode,
};
use crate::scm::PullRequestRef;

const API_VERSION: &str = "2022-11-28";
/// Items per page of every list read.
pub const PER_PAGE: &str = "100";

/// The REST and GraphQL API of one GitHub host.
pub struct Api {
    client: HttpClient,
    graphql_url: String,
    page_cap: usize,
    etags: Mutex<EtagCache>,
}

impl Api {
    pub fn new(
        endpoint: &str,
        token: &str,
        tuning: &HttpTuning,
        etag_cache_size: usize,
        clock: Arc<dyn Clock>,
    ) -> Api {
        let mut opts = ClientOptions::tuned(endpoint, tuning);
        opts.auth = Some(("Authorization".into(), format!("Bearer {token}")));
        opts.headers = vec![
            ("Accept".into(), "application/vnd.github+json".into()),
            ("X-GitHub-Api-Version".into(), API_VERSION.into()),
        ];
        let graphql_url = graphql_url(&opts.base_url);
        Api {
            client: HttpClient::new(opts, clock, Arc::new(ThreadSleeper)),
            graphql_url,
            page_cap: tuning.page_cap,
            etags: Mutex::new(EtagCache::new(etag_cache_size)),
        }
    }

    /// `/repos/{owner}/{repo}`.
    pub fn repo_path(pr: &PullRequestRef) -> String {
        format!("/repos/{}/{}", encode(&pr.owner), encode(&pr.repo))
    }

    pub fn send(&self, req: Request) -> Result<Response, HttpError> {
        self.client.send(req)
    }

    /// `GET path`, conditional on the ETag of its last answer (a 304 reuses that answer).
    pub fn get_cached(&self, path: &str, query: &[(&str, &str)]) -> Result<Value, HttpError> {
        let key = query
            .iter()
            .fold(path.to_string(), |k, (n, v)| format!("{k}&{n}={v}"));
        let mut req = Request::get(path);
        for (n, v) in query {
            req = req.query(n, *v);
        }
        let cached = self
            .etags
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .etag(&key);
        if let Some(tag) = &cached {
            req = req.header("If-None-Match", tag.clone());
        }
        let resp = self.client.send(req)?;
        let mut etags = self.etags.lock().unwrap_or_else(|p| p.into_inner());
        if resp.status == 304
            && let Some(body) = etags.hit(&key)
        {
            return Ok(body);
        }
        let body: Value = resp.json()?;
        if let Some(tag) = resp.header("etag") {
            etags.store(&key, tag, &body, resp.body.len());
        }
        Ok(body)
    }

    /// Every page of a list, at most `min(page_cap, cap)` pages; `items` picks a page's
    /// elements (`None`: the page has the wrong shape).
    pub fn list(
        &self,
        req: Request,
        cap: usize,
        what: &str,
        items: impl Fn(Value) -> Option<Vec<Value>>,
    ) -> Result<Vec<Value>, HttpError> {
        let req = req.query("per_page", PER_PAGE);
        collect_link_pages(&self.client, req, cap.min(self.page_cap), what, |r| {
            let body: Value = r.json()?;
            items(body).ok_or_else(|| {
                HttpError::new(
                    ErrorClass::Payload,
                    r.method,
                    &r.path,
                    format!("a {what} page has an unexpected shape"),
                )
            })
        })
    }

    /// `POST` a GraphQL query; the answer's `data`, or a classified error for its `errors`.
    pub fn graphql(&self, query: &str, variables: Value) -> Result<Value, HttpError> {
        let body = serde_json::json!({ "query": query, "variables": variables });
        let req =
            Request::new(crate::http_client::Method::Post, self.graphql_url.clone()).json(&body);
        let resp = self.client.send(req)?;
        let v: Value = resp.json()?;
        if let Some(errors) = v["errors"].as_array().filter(|e| !e.is_empty()) {
            let kind = errors[0]["type"].as_str().unwrap_or("");
            let class = match kind {
                "NOT_FOUND" => ErrorClass::NotFound,
                "FORBIDDEN" => ErrorClass::Auth,
                _ => ErrorClass::Api,
            };
            let message = errors[0]["message"].as_str().unwrap_or("GraphQL error");
            let mut e = HttpError::new(
                class,
                "POST",
                &resp.path,
                format!("GraphQL {kind}: {message}"),
            );
            if kind == "RATE_LIMITED" {
                e.status = Some(429);
            }
            return Err(e);
        }
        Ok(v["data"].clone())
    }
}

/// GitHub's GraphQL endpoint for a REST base: `…/api/v3` (Enterprise Server) becomes
/// `…/api/graphql`; anything else gets `/graphql` appended.
fn graphql_url(base: &str) -> String {
    match base.strip_suffix("/api/v3") {
        Some(host) => format!("{host}/api/graphql"),
        None => format!("{base}/graphql"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_lives_beside_the_rest_base() {
        assert_eq!(
            graphql_url("https://api.github.com"),
            "https://api.github.com/graphql"
        );
        assert_eq!(
            graphql_url("https://ghe.example/api/v3"),
            "https://ghe.example/api/graphql"
        );
    }
}
