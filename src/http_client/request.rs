//! What a caller sends and gets back: plain values, so adapters and their tests never touch
//! ureq types.

use serde::de::DeserializeOwned;

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
}

impl Response {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        header_value(&self.headers, name)
    }

    /// The body parsed as JSON; a body that does not parse is a payload error.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            let mut err = HttpError::new(
                ErrorClass::Payload,
                self.method,
                &self.path,
                format!(
                    "invalid JSON in a {} response: {e}: {}",
                    self.status,
                    snippet(&self.body)
                ),
            );
            err.status = Some(self.status);
            err
        })
    }
}

impl Response {
    /// The body as one JSON object; any other JSON is a payload error naming what came.
    pub fn json_object(&self) -> Result<serde_json::Value, HttpError> {
        match self.json()? {
            v @ serde_json::Value::Object(_) => Ok(v),
            other => Err(self.not_shaped("an object", &other)),
        }
    }

    /// The body as a JSON array; any other JSON is a payload error naming what came.
    pub fn json_array(&self) -> Result<Vec<serde_json::Value>, HttpError> {
        match self.json()? {
            serde_json::Value::Array(items) => Ok(items),
            other => Err(self.not_shaped("an array", &other)),
        }
    }

    fn not_shaped(&self, want: &str, got: &serde_json::Value) -> HttpError {
        let got = match got {
            serde_json::Value::Null => "null",
            serde_json::Value::Bool(_) => "a boolean",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::Object(_) => "an object",
        };
        let mut err = HttpError::new(
            ErrorClass::Payload,
            self.method,
            &self.path,
            format!("expected {want} in the JSON answer, got {got}"),
        );
        err.status = Some(self.status);
        err
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
                "expected an object in the JSON answer, got an array".into(),
                Some(200)
            ))
        );
        let e = answer("null").json_array().err().map(|e| e.detail);
        assert_eq!(
            e.as_deref(),
            Some("expected an array in the JSON answer, got null")
        );
        assert!(answer("{").json_object().is_err());
    }
}
