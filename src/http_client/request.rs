//! What a caller sends and gets back: plain values, so adapters and their tests never touch
//! ureq types.

use serde_json::Value;

use super::error::{ErrorClass, HttpError, snippet};

/// The methods adapters use. Only `Get` is idempotent enough to be retried automatically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }

    /// Whether a failed call may be sent again without the caller asking: a repeated write
    /// could post a comment twice, so only reads qualify.
    pub fn auto_retry(self) -> bool {
        self == Method::Get
    }
}

/// One request. `url` is either a path joined to the client's base URL or an absolute URL
/// (a `Link` header's next page is followed verbatim).
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    pub url: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    /// A JSON body; sent with `Content-Type: application/json`.
    pub body: Option<Vec<u8>>,
    /// A redirect (3xx) answer is returned to the caller as a response instead of failing, so
    /// the caller can follow its `Location` itself (the client never follows redirects).
    pub accept_redirect: bool,
    /// A read sent by a method other than GET (a GraphQL query is a POST), so the client may
    /// retry it like a GET.
    pub retry_safe: bool,
}

impl Request {
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Request {
            method,
            url: url.into(),
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            accept_redirect: false,
            retry_safe: false,
        }
    }

    pub fn get(url: impl Into<String>) -> Self {
        Request::new(Method::Get, url)
    }

    pub fn query(mut self, key: &str, value: impl Into<String>) -> Self {
        self.query.push((key.to_string(), value.into()));
        self
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// Returns a 3xx answer as a response (see [`Request::accept_redirect`]).
    pub fn redirect_allowed(mut self) -> Self {
        self.accept_redirect = true;
        self
    }

    /// Marks a read sent by POST as safe to retry (see [`Request::retry_safe`]).
    pub fn read_only(mut self) -> Self {
        self.retry_safe = true;
        self
    }

    pub fn json(mut self, body: &serde_json::Value) -> Self {
        self.body = Some(body.to_string().into_bytes());
        self
    }
}

/// A response whose status the client accepted (2xx or 304; 3xx when the request allowed it).
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub method: &'static str,
    pub path: String,
    /// The most memory the body's JSON tree may take once parsed (see [`Response::json`]).
    pub tree_limit: usize,
}

impl Response {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        header_value(&self.headers, name)
    }

    /// The body parsed as JSON, its tree within [`Response::tree_limit`]; a body that does not
    /// parse (HTML, text, cut off) is a payload error carrying the body's first bytes, and a
    /// tree over the limit an error naming it.
    pub fn json(&self) -> Result<Value, HttpError> {
        super::json_tree::parse_bounded(&self.body, self.tree_limit).map_err(|e| {
            let class = if super::json_tree::is_ceiling(&e) {
                ErrorClass::TooLarge
            } else {
                ErrorClass::Payload
            };
            self.error(
                class,
                format!("invalid JSON in a {} response: {e}", self.status),
            )
        })
    }

    /// An answer the caller cannot read (wrong shape, missing fields): a payload error whose
    /// detail ends with the body's first bytes, masked and escaped.
    pub fn unreadable(&self, detail: impl Into<String>) -> HttpError {
        self.error(ErrorClass::Payload, detail.into())
    }

    fn error(&self, class: ErrorClass, detail: String) -> HttpError {
        let snip = snippet(&self.body);
        let detail = if snip.is_empty() {
            format!("{detail} (empty body)")
        } else {
            format!("{detail}: {snip}")
        };
        let mut err = HttpError::new(class, self.method, &self.path, detail);
        err.status = Some(self.status);
        err
    }
}

impl Response {
    /// The body as one JSON object; any other JSON is a payload error naming what came.
    pub fn json_object(&self) -> Result<Value, HttpError> {
        match self.json()? {
            v @ Value::Object(_) => Ok(v),
            other => Err(self.not_shaped("an object", &other)),
        }
    }

    /// The body as a JSON array; any other JSON is a payload error naming what came.
    pub fn json_array(&self) -> Result<Vec<Value>, HttpError> {
        match self.json()? {
            Value::Array(items) => Ok(items),
            other => Err(self.not_shaped("an array", &other)),
        }
    }

    /// The body as a JSON array whose every item is an object carrying a non-null `need` (an
    /// issue's number, a comment's id); a payload error naming the first item without it.
    pub fn json_items(&self, what: &str, need: &str) -> Result<Vec<Value>, HttpError> {
        self.checked_items(self.json_array()?, what, need)
    }

    /// `items` (read from this answer) when each carries a non-null `need`.
    pub fn checked_items(
        &self,
        items: Vec<Value>,
        what: &str,
        need: &str,
    ) -> Result<Vec<Value>, HttpError> {
        match items
            .iter()
            .position(|v| v.get(need).is_none_or(Value::is_null))
        {
            None => Ok(items),
            Some(i) => Err(self.unreadable(format!("{what} item {i} has no {need}"))),
        }
    }

    fn not_shaped(&self, want: &str, got: &Value) -> HttpError {
        self.unreadable(format!(
            "expected {want} in the JSON answer, got {}",
            kind_of(got)
        ))
    }
}

/// What a JSON value is, for messages: `null`, `a boolean`, `an array`, ….
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The first value of `name` among lowercased headers.
pub(crate) fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    headers
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: &str) -> Response {
        Response {
            status: 200,
            headers: Vec::new(),
            body: body.as_bytes().to_vec(),
            method: "GET",
            path: "/x".into(),
            tree_limit: 1 << 20,
        }
    }

    #[test]
    fn json_shapes_are_checked_and_named() {
        assert!(answer(r#"{"a": 1}"#).json_object().is_ok());
        assert_eq!(answer("[1, 2]").json_array().map(|v| v.len()), Ok(2));
        let e = answer("[1]").json_object().err();
        let e = e.map(|e| (e.class, e.detail, e.status));
        assert_eq!(
            e,
            Some((
                ErrorClass::Payload,
                "expected an object in the JSON answer, got an array: [1]".into(),
                Some(200)
            ))
        );
        let e = answer("null").json_array().err().map(|e| e.detail);
        assert_eq!(
            e.as_deref(),
            Some("expected an array in the JSON answer, got null: null")
        );
        assert!(answer("{").json_object().is_err());
    }

    #[test]
    fn an_unreadable_answer_carries_its_first_bytes() {
        let e = answer("<html>\n<body>\u{1b}[31mBad Gateway</body></html>")
            .json()
            .err()
            .map(|e| (e.class, e.detail));
        let (class, detail) = e.unwrap_or((ErrorClass::Api, String::new()));
        assert_eq!(class, ErrorClass::Payload);
        assert!(
            detail.starts_with("invalid JSON in a 200 response: expected value at line 1"),
            "{detail}"
        );
        assert!(
            detail.ends_with(": <html> <body>\\u{1b}[31mBad Gateway</body></html>"),
            "{detail}"
        );
        let e = answer("").unreadable("no issues").detail;
        assert_eq!(e, "no issues (empty body)");
        let mut big = answer(&format!("[{}0]", "0,".repeat(1000)));
        big.tree_limit = 1000;
        assert_eq!(
            big.json().err().map(|e| e.class),
            Some(ErrorClass::TooLarge)
        );
    }
}
