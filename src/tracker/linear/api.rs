//! GraphQL over the shared HTTP client, shaped as Linear documents it
//! (<https://linear.app/developers/graphql>, <https://linear.app/developers/rate-limiting>,
//! <https://linear.app/developers/pagination>): every operation is `POST <endpoint>/graphql`
//! with `{query, variables}` and the personal API key sent raw in `Authorization` (no
//! `Bearer`). Queries are sent as retry-safe reads; mutations never are.
//!
//! GraphQL failures arrive as HTTP 200 or 400 with an `errors` array; they are classified by
//! `extensions.code` and message: authentication → auth, `RATELIMITED` → API (retried later,
//! with the wait from `X-RateLimit-Requests-Reset`, epoch milliseconds), entity not found →
//! not found, invalid input → payload. An answer with both `data` and `errors` is an error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::settings::LinearConfig;
use crate::clock::Clock;
use crate::http_client::{
    ClientOptions, CursorPage, ErrorClass, HttpClient, HttpError, Method, RateLimitStatus, Request,
    ThreadSleeper, collect_cursor_pages,
};

/// The page size of every connection read.
pub const PAGE: usize = 50;
const PATH: &str = "/graphql";

/// One Linear workspace's API.
pub struct LinearApi {
    client: HttpClient,
    clock: Arc<dyn Clock>,
    rate: Mutex<RateLimitStatus>,
    page_cap: usize,
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn num(headers: &[(String, String)], name: &str) -> Option<u64> {
    header(headers, name).and_then(|v| v.trim().parse().ok())
}

/// The class of one GraphQL error object, from its code, then its message.
pub fn class_of(e: &Value) -> ErrorClass {
    let code = e
        .pointer("/extensions/code")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_uppercase();
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase();
    class_of_words(&code, &message)
}

fn class_of_words(code: &str, message: &str) -> ErrorClass {
    if code.contains("RATELIMITED") || message.contains("rate limit") {
        ErrorClass::Api
    } else if code.contains("AUTHENTICATION") || code.contains("FORBIDDEN") {
        ErrorClass::Auth
    } else if code.contains("NOT_FOUND") || message.contains("not found") {
        ErrorClass::NotFound
    } else if code.contains("INVALID_INPUT")
        || code.contains("GRAPHQL_VALIDATION")
        || code.contains("BAD_USER_INPUT")
        || code.contains("GRAPHQL_PARSE")
    {
        ErrorClass::Payload
    } else {
        ErrorClass::Api
    }
}

impl LinearApi {
    pub fn new(c: &LinearConfig, clock: Arc<dyn Clock>) -> Self {
        let mut opts = ClientOptions::tuned(&c.endpoint, &c.tuning);
        opts.auth = Some(("Authorization".into(), c.token.clone()));
        opts.headers = vec![("Accept".into(), "application/json".into())];
        LinearApi {
            client: HttpClient::new(opts, Arc::clone(&clock), Arc::new(ThreadSleeper)),
            clock,
            rate: Mutex::new(RateLimitStatus::default()),
            page_cap: c.tuning.page_cap,
        }
    }

    /// The latest `X-RateLimit-Requests-*` figures; `None` before any answer carried them.
    pub fn rate_limit(&self) -> Option<RateLimitStatus> {
        let s = self.rate.lock().unwrap_or_else(|p| p.into_inner()).clone();
        (s != RateLimitStatus::default()).then_some(s)
    }

    fn observe(&self, headers: &[(String, String)], limited: Option<u16>) {
        let mut rate = self.rate.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = num(headers, "x-ratelimit-requests-limit") {
            rate.limit = Some(v);
        }
        if let Some(v) = num(headers, "x-ratelimit-requests-remaining") {
            rate.remaining = Some(v);
        }
        if let Some(v) = num(headers, "x-ratelimit-requests-reset") {
            rate.reset_at_ms = i64::try_from(v).ok();
        }
        if let Some(status) = limited {
            rate.limited(status, self.clock.now_ms());
        }
    }

    /// The wait until the request budget refills, from `X-RateLimit-Requests-Reset`.
    fn reset_wait(&self, headers: &[(String, String)]) -> Option<Duration> {
        let reset = i64::try_from(num(headers, "x-ratelimit-requests-reset")?).ok()?;
        let ms = reset.saturating_sub(self.clock.now_ms()).max(0);
        Some(Duration::from_millis(ms as u64))
    }

    fn graphql_error(
        &self,
        op: &str,
        status: u16,
        headers: &[(String, String)],
        errors: &[Value],
    ) -> HttpError {
        let first = errors.first().cloned().unwrap_or(Value::Null);
        let mut class = class_of(&first);
        let spent = num(headers, "x-ratelimit-requests-remaining") == Some(0);
        if spent {
            class = ErrorClass::Api;
        }
        let limited = class == ErrorClass::Api
            && (spent
                || errors.iter().any(|e| {
                    e.pointer("/extensions/code").and_then(Value::as_str) == Some("RATELIMITED")
                }));
        let message = first
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("unexplained GraphQL error");
        let code = first
            .pointer("/extensions/code")
            .and_then(Value::as_str)
            .unwrap_or("no code");
        let mut detail = format!("{op}: status {status}: {code}: {message}");
        let mut wait = None;
        if limited {
            self.observe(headers, Some(status));
            wait = self.reset_wait(headers);
            match wait {
                Some(w) => {
                    detail.push_str(&format!(" (rate limit, retry after {} s)", w.as_secs()))
                }
                None => detail.push_str(" (rate limit)"),
            }
        }
        if errors.len() > 1 {
            detail.push_str(&format!(" (and {} more errors)", errors.len() - 1));
        }
        let mut e = HttpError::new(class, "POST", PATH, crate::mask::mask(&detail));
        e.status = Some(status);
        e.retry_after = wait;
        e.headers = headers.to_vec();
        e
    }

    /// Sends one operation and answers its `data` once `check` accepts it: an answer the
    /// check finds unreadable is a payload error quoting the answer's first bytes, one that
    /// says the named entity is absent (`null`) is not-found. `op` names it in errors and logs.
    fn send(
        &self,
        op: &str,
        query: &str,
        variables: Value,
        read: bool,
        check: impl Fn(&Value) -> Result<(), Gap>,
    ) -> Result<Value, HttpError> {
        let mut req = Request::new(Method::Post, PATH).json(&json!({
            "operationName": op,
            "query": query,
            "variables": variables,
        }));
        if read {
            req = req.read_only();
        }
        let resp = match self.client.send(req) {
            Ok(r) => r,
            Err(e) if e.status == Some(400) || e.status == Some(401) || e.status == Some(403) => {
                return Err(self.refusal(op, e));
            }
            Err(e) => return Err(e),
        };
        self.observe(&resp.headers, None);
        let body: Value = resp.json()?;
        if let Some(errors) = body.get("errors").and_then(Value::as_array)
            && !errors.is_empty()
        {
            return Err(self.graphql_error(op, resp.status, &resp.headers, errors));
        }
        let data = match body {
            Value::Object(mut m) => m.remove("data").unwrap_or(Value::Null),
            _ => Value::Null,
        };
        if !data.is_object() {
            return Err(resp.unreadable(format!("{op}: answer has no data")));
        }
        match check(&data) {
            Ok(()) => Ok(data),
            Err(Gap::Unreadable(d)) => Err(resp.unreadable(format!("{op}: {d}"))),
            Err(Gap::Absent(d)) => Err(HttpError::new(
                ErrorClass::NotFound,
                "POST",
                PATH,
                format!("{op}: {d}"),
            )),
        }
    }

    /// A 400/401/403 answer: its GraphQL errors (in the body snippet the client kept) decide.
    fn refusal(&self, op: &str, e: HttpError) -> HttpError {
        let status = e.status.unwrap_or(400);
        let body = e.detail.split_once(": ").map_or("", |(_, b)| b);
        if let Ok(v) = serde_json::from_str::<Value>(body)
            && let Some(errors) = v.get("errors").and_then(Value::as_array)
            && !errors.is_empty()
        {
            return self.graphql_error(op, status, &e.headers, errors);
        }
        // A body cut at the snippet limit still names its code.
        let upper = body.to_ascii_uppercase();
        let mut class = match status {
            400 => class_of_words(&upper, &body.to_ascii_lowercase()),
            _ => e.class,
        };
        if status == 400 && class == ErrorClass::Api {
            class = ErrorClass::Payload;
        }
        if num(&e.headers, "x-ratelimit-requests-remaining") == Some(0)
            || upper.contains("RATELIMITED")
        {
            self.observe(&e.headers, Some(status));
            class = ErrorClass::Api;
        }
        let mut out = e;
        out.class = class;
        out.detail = format!("{op}: {}", out.detail);
        out
    }

    /// A query's `data`, once `check` accepts it.
    pub fn query(
        &self,
        op: &str,
        query: &str,
        variables: Value,
        check: impl Fn(&Value) -> Result<(), Gap>,
    ) -> Result<Value, HttpError> {
        self.send(op, query, variables, true, check)
    }

    /// A mutation whose payload at `field` must say `success: true`.
    pub fn mutate(
        &self,
        op: &str,
        query: &str,
        variables: Value,
        field: &str,
    ) -> Result<Value, HttpError> {
        let data = self.send(op, query, variables, false, |_| Ok(()))?;
        let payload = data.get(field).cloned().unwrap_or(Value::Null);
        if payload.get("success").and_then(Value::as_bool) != Some(true) {
            return Err(HttpError::new(
                ErrorClass::Api,
                "POST",
                PATH,
                format!("{op}: {field} did not succeed"),
            ));
        }
        Ok(payload)
    }

    /// Every node of the connection at `pointer` in the answers, page by page up to the cap,
    /// each node carrying every field of `need` (JSON pointers); `$first` and `$after` are
    /// set here. A `null` entity on the way (an unknown issue's comments) is not-found. Each
    /// node is turned into what `keep` makes of it as its page is read.
    pub fn nodes<T>(
        &self,
        op: &str,
        query: &str,
        variables: Value,
        pointer: &str,
        need: &[&str],
        mut keep: impl FnMut(Value) -> Option<T>,
    ) -> Result<Vec<T>, HttpError> {
        collect_cursor_pages(self.page_cap, op, |cursor| {
            let mut vars = variables.clone();
            vars["first"] = json!(PAGE);
            vars["after"] = cursor.map_or(Value::Null, |c| json!(c));
            let mut data = self.query(op, query, vars, |d| connection_gap(d, pointer, need))?;
            let mut conn = data
                .pointer_mut(pointer)
                .map(Value::take)
                .unwrap_or_default();
            let items = match conn.get_mut("nodes").map(Value::take) {
                Some(Value::Array(items)) => items.into_iter().filter_map(&mut keep).collect(),
                _ => Vec::new(),
            };
            Ok(CursorPage {
                items,
                next: conn
                    .pointer("/pageInfo/endCursor")
                    .and_then(Value::as_str)
                    .map(String::from),
                has_more: conn
                    .pointer("/pageInfo/hasNextPage")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
    }
}

/// What a check found wrong with an answer's `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gap {
    /// Not the shape asked for: a payload error.
    Unreadable(String),
    /// The entity asked for is `null`: it does not exist (not-found).
    Absent(String),
}

/// Whether `v` holds a non-empty value at `pointer`.
pub fn has(v: &Value, pointer: &str) -> bool {
    match v.pointer(pointer) {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// The entity at `/<field>` of `data`: absent when `null`, unreadable when missing or when it
/// lacks a field of `need`.
pub fn entity_gap(data: &Value, field: &str, need: &[&str]) -> Result<(), Gap> {
    match data.get(field) {
        None => Err(Gap::Unreadable(format!("answer has no {field}"))),
        Some(Value::Null) => Err(Gap::Absent(format!("no such {field}"))),
        Some(v) => match need.iter().find(|n| !has(v, n)) {
            Some(n) => Err(Gap::Unreadable(format!("the {field} has no {n}"))),
            None => Ok(()),
        },
    }
}

/// The connection at `pointer` of `data`: a `null` entity on the way is absent; a missing
/// step, a `null` connection, no `nodes` list, or a node lacking a field of `need` is
/// unreadable.
pub fn connection_gap(data: &Value, pointer: &str, need: &[&str]) -> Result<(), Gap> {
    let steps: Vec<&str> = pointer.split('/').skip(1).collect();
    let mut at = data;
    for (i, step) in steps.iter().enumerate() {
        match at.get(step) {
            None => {
                return Err(Gap::Unreadable(format!(
                    "nothing at {pointer} in the answer"
                )));
            }
            Some(Value::Null) if i + 1 < steps.len() => {
                return Err(Gap::Absent(format!("no such {step}")));
            }
            Some(Value::Null) => return Err(Gap::Unreadable(format!("{pointer} is null"))),
            Some(v) => at = v,
        }
    }
    let Some(nodes) = at.get("nodes").and_then(Value::as_array) else {
        return Err(Gap::Unreadable(format!("answer has no nodes at {pointer}")));
    };
    for (i, n) in nodes.iter().enumerate() {
        if let Some(missing) = need.iter().find(|f| !has(n, f)) {
            return Err(Gap::Unreadable(format!(
                "node {i} at {pointer} has no {missing}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_only_in_the_shape_asked_for() {
        let need = ["/id", "/state/name"];
        let ok = json!({"issues": {"nodes": [{"id": "a", "state": {"name": "Todo"}}]}});
        assert_eq!(connection_gap(&ok, "/issues", &need), Ok(()));
        let gap = |d: Value, p: &str| connection_gap(&d, p, &need);
        assert!(matches!(gap(json!({}), "/issues"), Err(Gap::Unreadable(_))));
        assert!(matches!(
            gap(json!({"issues": null}), "/issues"),
            Err(Gap::Unreadable(_))
        ));
        assert!(matches!(
            gap(json!({"issues": {}}), "/issues"),
            Err(Gap::Unreadable(_))
        ));
        let fieldless = json!({"issues": {"nodes": [{"id": "a"}]}});
        assert_eq!(
            gap(fieldless, "/issues"),
            Err(Gap::Unreadable(
                "node 0 at /issues has no /state/name".into()
            ))
        );
        let absent = json!({"issue": null});
        assert!(matches!(
            connection_gap(&absent, "/issue/comments", &[]),
            Err(Gap::Absent(_))
        ));
        assert!(matches!(
            entity_gap(&json!({"issue": null}), "issue", &["/id"]),
            Err(Gap::Absent(_))
        ));
        assert!(matches!(
            entity_gap(&json!({"issue": {"x": 1}}), "issue", &["/id"]),
            Err(Gap::Unreadable(_))
        ));
        assert!(matches!(
            entity_gap(&json!({}), "issue", &["/id"]),
            Err(Gap::Unreadable(_))
        ));
    }

    #[test]
    fn graphql_error_codes_map_onto_classes() {
        let e = |code: &str, message: &str| {
            class_of(&json!({"message": message, "extensions": {"code": code}}))
        };
        assert_eq!(
            e("AUTHENTICATION_ERROR", "Authentication required"),
            ErrorClass::Auth
        );
        assert_eq!(e("FORBIDDEN", "no access"), ErrorClass::Auth);
        assert_eq!(e("RATELIMITED", "Rate limit exceeded"), ErrorClass::Api);
        assert_eq!(
            e("INVALID_INPUT", "Entity not found: Issue"),
            ErrorClass::NotFound
        );
        assert_eq!(
            e("INVALID_INPUT", "stateId must be a UUID"),
            ErrorClass::Payload
        );
        assert_eq!(
            e("GRAPHQL_VALIDATION_FAILED", "Cannot query field"),
            ErrorClass::Payload
        );
        assert_eq!(e("INTERNAL_SERVER_ERROR", "oops"), ErrorClass::Api);
        assert_eq!(class_of(&json!({})), ErrorClass::Api);
    }
}
