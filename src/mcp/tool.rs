//! The tool contract every MCP tool implements, and the argument checks they share.

use serde_json::{Map, Value, json};

/// Why a call produced no ordinary result.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolError {
    /// The arguments break the tool's input schema: a JSON-RPC `-32602` error.
    InvalidArguments(String),
    /// The tool ran and failed: this body is the result, flagged `isError`.
    Failed(Value),
    /// The call asks for something outside what the session may touch: a JSON-RPC `-32602`
    /// error with this message (naming the rule) and `data`.
    Refused { message: String, data: Value },
}

impl ToolError {
    /// A failure whose body is `{"error": message}`.
    pub fn message(message: impl Into<String>) -> ToolError {
        ToolError::Failed(json!({"error": message.into()}))
    }
}

/// One tool of the server. Calls run one at a time on the server's thread.
pub trait Tool: Send {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// The JSON Schema of `arguments`.
    fn input_schema(&self) -> Value;
    /// Runs the tool; the result is the JSON the client receives as text.
    fn call(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError>;
}

/// The schema of a tool that takes no arguments.
pub fn empty_schema() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

/// Refuses every argument of a tool that takes none.
pub fn no_arguments(arguments: &Map<String, Value>) -> Result<(), ToolError> {
    match arguments.keys().next() {
        None => Ok(()),
        Some(k) => Err(ToolError::InvalidArguments(format!(
            "unknown argument {k:?}: this tool takes no arguments"
        ))),
    }
}
