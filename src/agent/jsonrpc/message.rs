//! JSON-RPC wire shapes. A line with `method` is a notification, or a server request when it
//! also has an `id`; a line with an `id` and no `method` is a response.

use serde_json::{Map, Value, json};

/// Which JSON-RPC flavour the peer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// No `jsonrpc` member on any message (codex `app-server`).
    Bare,
    /// JSON-RPC 2.0: every message carries `"jsonrpc":"2.0"`.
    V2,
}

/// A response's `error` member.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcErrorObject {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl std::fmt::Display for RpcErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

/// One message from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Notification {
        method: String,
        params: Value,
    },
    /// The peer asks something and waits for an answer with the same `id`.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Response {
        id: Value,
        result: Result<Value, RpcErrorObject>,
    },
    /// A line that is not a JSON-RPC message (kept as text).
    Malformed(String),
}

impl Message {
    /// What kind of message this is, for a log line.
    pub fn kind_word(&self) -> &'static str {
        match self {
            Message::Notification { .. } => "notification",
            Message::Request { .. } => "request",
            Message::Response { .. } => "response",
            Message::Malformed(_) => "malformed",
        }
    }

    /// Classifies one stdout line.
    pub fn parse(line: &[u8]) -> Message {
        let text = String::from_utf8_lossy(line);
        match serde_json::from_str::<Value>(text.trim()) {
            Ok(Value::Object(m)) => Self::from_object(m),
            _ => Message::Malformed(text.trim().to_string()),
        }
    }

    /// Classifies one decoded JSON object.
    pub fn from_object(mut m: Map<String, Value>) -> Message {
        let id = m.remove("id").filter(|v| !v.is_null());
        let method = m.get("method").and_then(Value::as_str).map(str::to_string);
        let params = m.remove("params").unwrap_or(Value::Null);
        match (method, id) {
            (Some(method), Some(id)) => Message::Request { id, method, params },
            (Some(method), None) => Message::Notification { method, params },
            (None, Some(id)) => {
                let result = match m.remove("error") {
                    Some(e) if !e.is_null() => Err(error_object(&e)),
                    _ => Ok(m.remove("result").unwrap_or(Value::Null)),
                };
                Message::Response { id, result }
            }
            (None, None) => Message::Malformed(Value::Object(m).to_string()),
        }
    }

    /// The response's id as one of ours (they are positive integers).
    pub fn response_id(&self) -> Option<u64> {
        match self {
            Message::Response { id, .. } => id.as_u64(),
            _ => None,
        }
    }
}

fn error_object(e: &Value) -> RpcErrorObject {
    RpcErrorObject {
        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: e
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string()),
        data: e.get("data").cloned(),
    }
}

/// Encodes an outgoing message in `dialect`, newline-terminated.
pub fn encode(dialect: Dialect, mut body: Map<String, Value>) -> Vec<u8> {
    if dialect == Dialect::V2 {
        body.insert("jsonrpc".into(), json!("2.0"));
    }
    let mut bytes = Value::Object(body).to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

/// `{id, method, params}`.
pub fn request(dialect: Dialect, id: u64, method: &str, params: Value) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("id".into(), json!(id));
    m.insert("method".into(), json!(method));
    m.insert("params".into(), params);
    encode(dialect, m)
}

/// `{method, params}`.
pub fn notification(dialect: Dialect, method: &str, params: Value) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("method".into(), json!(method));
    m.insert("params".into(), params);
    encode(dialect, m)
}

/// `{id, result}` or `{id, error}`.
pub fn response(dialect: Dialect, id: &Value, result: Result<Value, RpcErrorObject>) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("id".into(), id.clone());
    match result {
        Ok(v) => {
            m.insert("result".into(), v);
        }
        Err(e) => {
            let mut err = json!({"code": e.code, "message": e.message});
            if let Some(d) = e.data {
                err["data"] = d;
            }
            m.insert("error".into(), err);
        }
    }
    encode(dialect, m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_told_apart_by_method_and_id() {
        assert!(matches!(
            Message::parse(br#"{"method":"turn/started","params":{"turnId":"t"}}"#),
            Message::Notification { method, .. } if method == "turn/started"
        ));
        assert!(matches!(
            Message::parse(br#"{"id":99,"method":"item/tool/call","params":{}}"#),
            Message::Request { method, .. } if method == "item/tool/call"
        ));
        let r = Message::parse(br#"{"id":3,"error":{"code":-32600,"message":"no"}}"#);
        assert_eq!(r.response_id(), Some(3));
        assert!(matches!(r, Message::Response { result: Err(e), .. } if e.code == -32600));
        assert!(matches!(Message::parse(b"not json"), Message::Malformed(_)));
    }

    #[test]
    fn the_dialect_decides_the_jsonrpc_member() {
        let bare = request(Dialect::Bare, 1, "initialize", json!({}));
        assert_eq!(
            bare,
            b"{\"id\":1,\"method\":\"initialize\",\"params\":{}}\n"
        );
        let v2 = String::from_utf8(notification(Dialect::V2, "x", json!({}))).unwrap_or_default();
        assert!(v2.contains("\"jsonrpc\":\"2.0\""));
    }
}
