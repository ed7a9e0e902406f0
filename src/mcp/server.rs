//! The server loop: one line in, at most one line out, until stdin ends. Every failure of a
//! line is answered (or, for a notification, ignored) and the loop goes on; a panicking tool
//! becomes an `isError` result, never a dead server.

use std::io::{self, BufRead, Write};

use serde_json::{Value, json};

use super::protocol::{self, INVALID_PARAMS, Incoming, Line, METHOD_NOT_FOUND, PARSE_ERROR};
use super::tool::{Tool, ToolError};

/// The name the server reports in `initialize`.
pub const SERVER_NAME: &str = "sortie-tools";

/// A set of tools, listed by name.
pub struct Server {
    tools: Vec<Box<dyn Tool>>,
}

impl Server {
    pub fn new(mut tools: Vec<Box<dyn Tool>>) -> Server {
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        Server { tools }
    }

    /// The registered tools' names, sorted.
    pub fn tool_names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// Answers one line; `None` for a notification or a blank line.
    pub fn handle_line(&self, line: &[u8]) -> Option<Value> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        match protocol::parse(line) {
            Incoming::Notification => None,
            Incoming::Invalid { id, code, message } => Some(protocol::error(id, code, &message)),
            Incoming::Request { id, method, params } => Some(self.request(id, &method, &params)),
        }
    }

    fn request(&self, id: Value, method: &str, params: &Value) -> Value {
        match method {
            "initialize" => protocol::result(
                id,
                json!({
                    "protocolVersion": protocol::PROTOCOL_VERSION,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": SERVER_NAME, "version": crate::build_info::VERSION},
                }),
            ),
            "tools/list" => {
                let tools: Vec<Value> = self
                    .tools
                    .iter()
                    .map(|t| {
                        json!({
                            "name": t.name(),
                            "description": t.description(),
                            "inputSchema": t.input_schema(),
                        })
                    })
                    .collect();
                protocol::result(id, json!({ "tools": tools }))
            }
            "tools/call" => match self.call(params) {
                Ok(r) => protocol::result(id, r),
                Err((message, None)) => protocol::error(id, INVALID_PARAMS, &message),
                Err((message, Some(data))) => {
                    protocol::error_with_data(id, INVALID_PARAMS, &message, data)
                }
            },
            other => protocol::error(id, METHOD_NOT_FOUND, &format!("Method not found: {other}")),
        }
    }

    /// A `tools/call`: the result object, or the message (and data) of a `-32602` error.
    fn call(&self, params: &Value) -> Result<Value, (String, Option<Value>)> {
        let invalid = |m: String| (m, None);
        let params = protocol::params_object(params)
            .ok_or_else(|| invalid("Invalid params: params must be an object".to_string()))?;
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("Invalid params: name must be a string".to_string()))?;
        let tool = self
            .tools
            .iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| invalid(format!("Invalid params: unknown tool {name:?}")))?;
        let args = protocol::params_object(params.get("arguments").unwrap_or(&Value::Null))
            .ok_or_else(|| invalid("Invalid params: arguments must be an object".to_string()))?;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tool.call(&args)))
            .unwrap_or_else(|_| Err(ToolError::message("internal error: the tool panicked")));
        let (body, is_error) = match outcome {
            Ok(v) => (v, false),
            Err(ToolError::Failed(v)) => (v, true),
            Err(ToolError::InvalidArguments(m)) => {
                return Err(invalid(format!("Invalid params: {m}")));
            }
            Err(ToolError::Refused { message, data }) => {
                let message = crate::mask::mask(&format!("Invalid params: {message}"));
                return Err((message, Some(data)));
            }
        };
        let text = crate::mask::mask(&body.to_string());
        let mut result = json!({"content": [{"type": "text", "text": text}]});
        if is_error {
            result["isError"] = Value::Bool(true);
        }
        Ok(result)
    }

    /// Serves `input` until it ends; each answer is one line on `output`, flushed.
    pub fn serve(&self, input: &mut impl BufRead, output: &mut impl Write) -> io::Result<()> {
        loop {
            let answer = match protocol::read_line(input, protocol::MAX_LINE_BYTES)? {
                Line::Eof => return Ok(()),
                Line::TooLong => Some(protocol::error(
                    Value::Null,
                    PARSE_ERROR,
                    "Parse error: message over the 10 MiB line limit",
                )),
                Line::Text(line) => self.handle_line(&line),
            };
            if let Some(answer) = answer {
                let mut bytes = serde_json::to_vec(&answer).map_err(io::Error::other)?;
                bytes.push(b'\n');
                output.write_all(&bytes)?;
                output.flush()?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool::{empty_schema, no_arguments};
    use serde_json::Map;

    struct Echo;
    impl Tool for Echo {
        fn name(&self) -> &'static str {
            "echo"
        }
        fn description(&self) -> &'static str {
            "echoes"
        }
        fn input_schema(&self) -> Value {
            empty_schema()
        }
        fn call(&self, a: &Map<String, Value>) -> Result<Value, ToolError> {
            no_arguments(a)?;
            Ok(json!({"ok": true}))
        }
    }
    struct Boom;
    impl Tool for Boom {
        fn name(&self) -> &'static str {
            "boom"
        }
        fn description(&self) -> &'static str {
            "fails"
        }
        fn input_schema(&self) -> Value {
            empty_schema()
        }
        fn call(&self, _: &Map<String, Value>) -> Result<Value, ToolError> {
            panic!("tool bug")
        }
    }

    fn answer(s: &Server, line: &str) -> Value {
        s.handle_line(line.as_bytes())
            .unwrap_or_else(|| panic!("no answer to {line}"))
    }

    #[test]
    fn calls_list_and_errors_follow_the_protocol() {
        let s = Server::new(vec![Box::new(Echo), Box::new(Boom)]);
        assert_eq!(s.tool_names(), ["boom", "echo"]);
        let init = answer(
            &s,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
        );
        assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
        assert_eq!(init["result"]["serverInfo"]["name"], "sortie-tools");
        let ok = answer(
            &s,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}"#,
        );
        assert_eq!(ok["result"]["content"][0]["type"], "text");
        assert_eq!(ok["result"]["content"][0]["text"], r#"{"ok":true}"#);
        assert!(ok["result"].get("isError").is_none());
        let bad_args = answer(
            &s,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}"#,
        );
        assert_eq!(bad_args["error"]["code"], -32602);
        let not_obj = answer(
            &s,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":[1]}}"#,
        );
        assert_eq!(not_obj["error"]["code"], -32602);
        let panicked = answer(
            &s,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"boom"}}"#,
        );
        assert_eq!(panicked["result"]["isError"], true);
        let unknown = answer(
            &s,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}"#,
        );
        assert_eq!(unknown["error"]["code"], -32602);
        let method = answer(&s, r#"{"jsonrpc":"2.0","id":6,"method":"resources/list"}"#);
        assert_eq!(method["error"]["code"], -32601);
        assert_eq!(method["id"], 6);
        assert!(s.handle_line(b"  ").is_none());
    }

    #[test]
    fn serve_answers_each_line_and_ends_at_eof() {
        let s = Server::new(vec![Box::new(Echo)]);
        let input = "{bad\n{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n";
        let mut out = Vec::new();
        s.serve(&mut input.as_bytes(), &mut out)
            .unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<Value> = String::from_utf8_lossy(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["error"]["code"], -32700);
        assert_eq!(lines[1]["result"]["tools"][0]["name"], "echo");
    }
}
