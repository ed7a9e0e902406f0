//! The wire: newline-delimited JSON-RPC 2.0 on stdin/stdout, one message per line of at most
//! [`MAX_LINE_BYTES`]. Parsing sorts a line into a request to answer, a notification to ignore
//! (no `id`), or the exact JSON-RPC error it earns.

use std::io::{self, BufRead};

use serde_json::{Map, Value, json};

/// The MCP revision this server speaks.
pub const PROTOCOL_VERSION: &str = "2024-11-05";
/// Longest line read; a longer one is dropped whole and answered with a parse error.
pub const MAX_LINE_BYTES: usize = 10 * 1024 * 1024;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// One line, sorted.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request to answer under `id`.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A message without an id: never answered.
    Notification,
    /// A line that earns an error response (`id` is `null` when none could be read).
    Invalid {
        id: Value,
        code: i64,
        message: String,
    },
}

/// Sorts one line (without its newline).
pub fn parse(line: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                code: PARSE_ERROR,
                message: format!("Parse error: {e}"),
            };
        }
    };
    let Value::Object(msg) = value else {
        return Incoming::Invalid {
            id: Value::Null,
            code: INVALID_REQUEST,
            message: "Invalid Request: a message is a JSON object".into(),
        };
    };
    let id = match msg.get("id") {
        None | Some(Value::Null) => return Incoming::Notification,
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        Some(_) => {
            return Incoming::Invalid {
                id: Value::Null,
                code: INVALID_REQUEST,
                message: "Invalid Request: id must be a string or a number".into(),
            };
        }
    };
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid {
            id,
            code: INVALID_REQUEST,
            message: "Invalid Request: jsonrpc must be \"2.0\"".into(),
        };
    }
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        return Incoming::Invalid {
            id,
            code: INVALID_REQUEST,
            message: "Invalid Request: method must be a string".into(),
        };
    };
    Incoming::Request {
        id,
        method: method.to_string(),
        params: msg.get("params").cloned().unwrap_or(Value::Null),
    }
}

/// A success response.
pub fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// An error response with `data` (what kind of refusal, which rule).
pub fn error_with_data(id: Value, code: i64, message: &str, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}})
}

/// `params` as an object: absent (`null`) reads as empty; anything else but an object is `None`.
pub fn params_object(params: &Value) -> Option<Map<String, Value>> {
    match params {
        Value::Null => Some(Map::new()),
        Value::Object(m) => Some(m.clone()),
        _ => None,
    }
}

/// One read from the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(Vec<u8>),
    /// A line over [`MAX_LINE_BYTES`], consumed through its newline.
    TooLong,
    Eof,
}

/// Reads one line without its newline, never buffering more than `max` bytes of it.
pub fn read_line(input: &mut impl BufRead, max: usize) -> io::Result<Line> {
    let mut buf = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Text(buf),
            });
        }
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if !too_long {
            if buf.len() + part.len() > max {
                too_long = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(part);
            }
        }
        let used = done.unwrap_or(chunk.len());
        input.consume(used);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Text(buf)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(line: &str) -> (Value, i64) {
        match parse(line.as_bytes()) {
            Incoming::Invalid { id, code, .. } => (id, code),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn lines_sort_into_requests_notifications_and_exact_errors() {
        assert_eq!(invalid("{nope"), (Value::Null, PARSE_ERROR));
        assert_eq!(invalid("[1,2]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            invalid(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#),
            (json!(3), INVALID_REQUEST)
        );
        assert_eq!(
            invalid(r#"{"id":"a","method":"x"}"#),
            (json!("a"), INVALID_REQUEST)
        );
        assert_eq!(
            invalid(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            invalid(r#"{"jsonrpc":"2.0","id":1}"#),
            (json!(1), INVALID_REQUEST)
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Incoming::Notification
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            Incoming::Notification
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#),
            Incoming::Request {
                id: json!(7),
                method: "tools/list".into(),
                params: Value::Null
            }
        );
    }

    #[test]
    fn long_lines_are_dropped_whole_and_reading_goes_on() {
        let text = format!("{}\nok\nlast", "x".repeat(100));
        let mut input = std::io::BufReader::with_capacity(7, text.as_bytes());
        assert_eq!(read_line(&mut input, 50).ok(), Some(Line::TooLong));
        assert_eq!(
            read_line(&mut input, 50).ok(),
            Some(Line::Text(b"ok".to_vec()))
        );
        assert_eq!(
            read_line(&mut input, 50).ok(),
            Some(Line::Text(b"last".to_vec()))
        );
        assert_eq!(read_line(&mut input, 50).ok(), Some(Line::Eof));
        let exact = "y".repeat(50);
        let mut input = std::io::BufReader::new(exact.as_bytes());
        assert_eq!(
            read_line(&mut input, 50).ok(),
            Some(Line::Text(exact.clone().into_bytes()))
        );
    }
}
