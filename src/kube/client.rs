//! A small synchronous Kubernetes API client: JSON create/get/list/delete with a deadline and a
//! size cap per answer, and the pod log stream. It keeps its own ureq agent (the trackers'
//! `http_client` has one global deadline per call and the public roots only) because a log
//! stream with `follow=true` lives as long as the agent writes, with a deadline per read
//! instead, and an in-cluster API server is verified against the service account's CA bundle.

use std::io::Read;
use std::time::Duration;

use serde_json::Value;

use super::auth::{Endpoint, TokenSource};
use super::error::{KubeError, KubeErrorKind};
use super::settings::KubeSettings;

/// The deadline of one JSON call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes one JSON answer may hold (a list of a namespace's Jobs included).
pub const MAX_ANSWER_BYTES: u64 = 8 << 20;
/// How long a log stream may stay silent before it is dropped and resumed.
pub const STREAM_READ_TIMEOUT: Duration = Duration::from_secs(120);

/// One API server, one namespace.
pub struct KubeClient {
    server: String,
    token: TokenSource,
    calls: ureq::Agent,
    streams: ureq::Agent,
    pub namespace: String,
}

impl KubeClient {
    /// A client for the block's API server and namespace.
    pub fn new(settings: &KubeSettings) -> Result<KubeClient, KubeError> {
        let Endpoint { server, token, tls } = super::auth::endpoint(&settings.auth)?;
        let agent = |global: Option<Duration>, per_read: Option<Duration>| {
            let config = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(global)
                .timeout_connect(Some(Duration::from_secs(10)))
                .timeout_per_read(per_read)
                .max_redirects(0)
                .user_agent(format!("sortie/{}", crate::build_info::VERSION))
                .tls_config(tls.clone())
                .build();
            ureq::Agent::new_with_config(config)
        };
        Ok(KubeClient {
            server: server.trim_end_matches('/').to_string(),
            token,
            calls: agent(Some(CALL_TIMEOUT), None),
            streams: agent(None, Some(STREAM_READ_TIMEOUT)),
            namespace: settings.namespace.clone(),
        })
    }

    /// `/api/v1/namespaces/<ns>/<resource>` or `/apis/batch/v1/...` for a resource of `group`.
    pub fn path(&self, group: Group, resource: &str, name: Option<&str>) -> String {
        let root = match group {
            Group::Core => "/api/v1",
            Group::Batch => "/apis/batch/v1",
        };
        let mut p = format!("{root}/namespaces/{}/{resource}", enc(&self.namespace));
        if let Some(n) = name {
            p.push('/');
            p.push_str(&enc(n));
        }
        p
    }

    /// Creates `object` at the collection `path`; the API's answer is the stored object.
    pub fn create(&self, path: &str, object: &Value) -> Result<Value, KubeError> {
        let body = serde_json::to_vec(object)
            .map_err(|e| KubeError::new(KubeErrorKind::Decode, e.to_string()))?;
        let req = self
            .calls
            .post(self.url(path, &[]))
            .header("content-type", "application/json");
        let req = self.authorised_body(req)?;
        self.finish("POST", path, req.send(&body[..]))
    }

    /// The object at `path`; `None` when it does not exist.
    pub fn get(&self, path: &str) -> Result<Option<Value>, KubeError> {
        match self.get_query(path, &[]) {
            Err(e) if e.status() == Some(404) => Ok(None),
            other => other.map(Some),
        }
    }

    /// The items of the collection `path` whose labels match `selector`.
    pub fn list(&self, path: &str, selector: &str) -> Result<Vec<Value>, KubeError> {
        let answer = self.get_query(path, &[("labelSelector", selector)])?;
        match answer.get("items") {
            Some(Value::Array(items)) => Ok(items.clone()),
            Some(Value::Null) | None => Ok(Vec::new()),
            Some(_) => Err(KubeError::new(
                KubeErrorKind::Decode,
                format!("GET {path}: items is not a list"),
            )),
        }
    }

    /// Deletes the object at `path` and, first, what it owns (`propagationPolicy: Foreground`);
    /// one already gone is no failure.
    pub fn delete(&self, path: &str) -> Result<(), KubeError> {
        let req = self
            .calls
            .delete(self.url(path, &[("propagationPolicy", "Foreground")]));
        let req = self.authorised(req)?;
        match self.finish("DELETE", path, req.call()) {
            Err(e) if e.status() == Some(404) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// A pod log stream (`follow=true`): the body as a reader, each read under
    /// [`STREAM_READ_TIMEOUT`].
    pub fn log_stream(
        &self,
        pod: &str,
        query: &[(&str, &str)],
    ) -> Result<Box<dyn Read + Send>, KubeError> {
        let path = format!("{}/log", self.path(Group::Core, "pods", Some(pod)));
        let req = self.authorised(self.streams.get(self.url(&path, query)))?;
        let mut resp = req
            .call()
            .map_err(|e| KubeError::new(KubeErrorKind::Transport, format!("GET {path}: {e}")))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let body = resp
                .body_mut()
                .with_config()
                .limit(64 << 10)
                .read_to_vec()
                .unwrap_or_default();
            return Err(status_error("GET", &path, status, &body));
        }
        Ok(Box::new(resp.into_body().into_reader()))
    }

    fn get_query(&self, path: &str, query: &[(&str, &str)]) -> Result<Value, KubeError> {
        let req = self.authorised(self.calls.get(self.url(path, query)))?;
        self.finish("GET", path, req.call())
    }

    fn url(&self, path: &str, query: &[(&str, &str)]) -> String {
        let mut url = format!("{}{path}", self.server);
        for (i, (k, v)) in query.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(&format!("{}={}", enc(k), enc(v)));
        }
        url
    }

    fn bearer(&self) -> Result<Option<String>, KubeError> {
        self.token.read().map(|t| t.map(|t| format!("Bearer {t}")))
    }

    fn authorised(
        &self,
        req: ureq::RequestBuilder<ureq::typestate::WithoutBody>,
    ) -> Result<ureq::RequestBuilder<ureq::typestate::WithoutBody>, KubeError> {
        Ok(match self.bearer()? {
            Some(b) => req.header("authorization", b),
            None => req,
        })
    }

    fn authorised_body(
        &self,
        req: ureq::RequestBuilder<ureq::typestate::WithBody>,
    ) -> Result<ureq::RequestBuilder<ureq::typestate::WithBody>, KubeError> {
        Ok(match self.bearer()? {
            Some(b) => req.header("authorization", b),
            None => req,
        })
    }

    fn finish(
        &self,
        method: &str,
        path: &str,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Value, KubeError> {
        let mut resp = sent.map_err(|e| {
            KubeError::new(KubeErrorKind::Transport, format!("{method} {path}: {e}"))
        })?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_vec()
            .map_err(|e| KubeError::new(KubeErrorKind::Decode, format!("{method} {path}: {e}")))?;
        if !(200..300).contains(&status) {
            return Err(status_error(method, path, status, &body));
        }
        serde_json::from_slice(&body).map_err(|e| {
            KubeError::new(
                KubeErrorKind::Decode,
                format!("{method} {path}: not JSON: {e}"),
            )
        })
    }
}

/// The API group a resource lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Core,
    Batch,
}

/// A non-2xx answer: the `Status` object's message when there is one.
fn status_error(method: &str, path: &str, status: u16, body: &[u8]) -> KubeError {
    let said = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
    KubeError::new(
        KubeErrorKind::Status(status),
        crate::mask::mask(&format!("{method} {path}: status {status}: {said}")),
    )
}

/// Percent-encodes a path segment or query part.
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
