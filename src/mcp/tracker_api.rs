//! `tracker_api`: the scoped subset of tracker operations an agent may run on the workflow's
//! tracker: read an issue or its comments, list the active candidates, move an issue to a
//! state. Every operation that names an issue resolves it first through the tracker's scope
//! check ([`TrackerAdapter::resolve_in_scope`]): the tracker's own answer must place it in the
//! configured project, team or repository (and query filter), however the id is spelled, and
//! an id that could change a request's path is refused before any request. The operation then
//! acts on the id the tracker answered, never on the agent's spelling. A refusal is a JSON-RPC
//! error (`-32602`) naming the rule, with `data.kind` `project_scope_violation`.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::tool::{Tool, ToolError};
use crate::tracker::{TrackerAdapter, TrackerError, TrackerErrorKind, scope};

/// The operations, as the schema lists them.
pub const OPERATIONS: &[&str] = &[
    "fetch_issue",
    "fetch_comments",
    "search_issues",
    "transition_issue",
];
const FIELDS: &[&str] = &["operation", "issue_id", "target_state"];

pub struct TrackerApiTool {
    pub tracker: Arc<dyn TrackerAdapter>,
}

/// The error kind a refused id is reported under.
pub const SCOPE_VIOLATION: &str = "project_scope_violation";

/// A failed operation: `{"success":false,"error":{"kind","message"}}`.
fn failure(kind: &str, message: impl Into<String>) -> Value {
    json!({"success": false, "error": {"kind": kind, "message": message.into()}})
}

/// The tool's error kind for a tracker failure.
fn tracker_kind(e: &TrackerError) -> &'static str {
    match e.kind {
        TrackerErrorKind::Transport => "tracker_transport_error",
        TrackerErrorKind::Auth | TrackerErrorKind::MissingTrackerApiKey => "tracker_auth_error",
        TrackerErrorKind::Api | TrackerErrorKind::MissingEndCursor => "tracker_api_error",
        TrackerErrorKind::NotFound => "tracker_not_found",
        TrackerErrorKind::Payload => "tracker_payload_error",
        TrackerErrorKind::OutOfScope => SCOPE_VIOLATION,
        TrackerErrorKind::UnsupportedTrackerKind | TrackerErrorKind::MissingTrackerProject => {
            "internal_error"
        }
    }
}

/// The JSON-RPC refusal of an id the tracker's scope check turned down.
fn refused(e: &TrackerError) -> ToolError {
    ToolError::Refused {
        message: format!("{SCOPE_VIOLATION}: {}", e.message),
        data: json!({"kind": SCOPE_VIOLATION, "tracker": e.tracker, "rule": scope::RULE}),
    }
}

/// An optional string argument: absent or `null` is `None`; another type breaks the schema.
fn string_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(ToolError::InvalidArguments(format!(
            "{key} must be a string"
        ))),
    }
}

impl TrackerApiTool {
    fn run(&self, args: &Map<String, Value>) -> Result<Value, ToolError> {
        if let Some(k) = args.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(ToolError::InvalidArguments(format!(
                "unknown argument {k:?} (accepted: operation, issue_id, target_state)"
            )));
        }
        let Some(operation) = string_arg(args, "operation")? else {
            return Err(ToolError::InvalidArguments("operation is required".into()));
        };
        let issue_id = string_arg(args, "issue_id")?.map(str::trim);
        let target_state = string_arg(args, "target_state")?
            .map(str::trim)
            .filter(|s| !s.is_empty());
        if !OPERATIONS.contains(&operation) {
            return Ok(failure(
                "unsupported_operation",
                format!(
                    "unsupported operation {operation:?} (supported: {})",
                    OPERATIONS.join(", ")
                ),
            ));
        }
        if operation == "search_issues" {
            return Ok(answer(
                self.tracker
                    .fetch_candidate_issues()
                    .map(|is| serde_json::to_value(is).unwrap_or(Value::Null)),
            ));
        }
        let Some(named) = issue_id.filter(|s| !s.is_empty()) else {
            return Ok(failure(
                "invalid_input",
                format!("{operation} needs issue_id"),
            ));
        };
        if operation == "transition_issue" && target_state.is_none() {
            return Ok(failure(
                "invalid_input",
                "transition_issue needs target_state",
            ));
        }
        // The operation acts on the id the tracker answered, never on the agent's spelling.
        let id = match self.tracker.resolve_in_scope(named) {
            Ok(issue) => issue.id,
            Err(e) if e.kind == TrackerErrorKind::OutOfScope => return Err(refused(&e)),
            Err(e) => return Ok(failure(tracker_kind(&e), e.to_string())),
        };
        Ok(answer(self.on_issue(operation, &id, target_state)))
    }

    /// Runs an issue operation on a resolved id.
    fn on_issue(
        &self,
        operation: &str,
        id: &str,
        target_state: Option<&str>,
    ) -> Result<Value, TrackerError> {
        match operation {
            "fetch_issue" => self
                .tracker
                .fetch_issue_by_id(id)
                .map(|i| serde_json::to_value(i).unwrap_or(Value::Null)),
            "fetch_comments" => self.tracker.fetch_issue_comments(id).map(|cs| {
                Value::Array(
                    cs.iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "author": c.author,
                                "body": c.body,
                                "created_at": c.created_at,
                            })
                        })
                        .collect(),
                )
            }),
            _ => self
                .tracker
                .transition_issue(id, target_state.unwrap_or_default())
                .map(|()| json!({"transitioned": true})),
        }
    }
}

/// The tool's envelope around an operation's outcome.
fn answer(data: Result<Value, TrackerError>) -> Value {
    match data {
        Ok(data) => json!({"success": true, "data": data}),
        Err(e) => failure(tracker_kind(&e), e.to_string()),
    }
}

impl Tool for TrackerApiTool {
    fn name(&self) -> &'static str {
        "tracker_api"
    }

    fn description(&self) -> &'static str {
        "Runs one operation on the issue tracker, limited to the configured project: fetch_issue, fetch_comments (need issue_id), search_issues (the active issues), transition_issue (needs issue_id and target_state). Answers {\"success\":true,\"data\":...} or {\"success\":false,\"error\":{\"kind\",\"message\"}}; an issue outside the project is refused with a JSON-RPC error (data.kind project_scope_violation)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": OPERATIONS},
                "issue_id": {"type": "string"},
                "target_state": {"type": "string"},
            },
            "required": ["operation"],
            "additionalProperties": false,
        })
    }

    fn call(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        let out = self.run(arguments)?;
        if out["success"] == false && out["error"]["kind"] == "internal_error" {
            return Err(ToolError::Failed(out));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Comment, Issue};
    use crate::tracker::{Blockers, TrackerResult};
    use std::collections::BTreeMap;

    /// Answers every read with `fail` when set, else one issue `MT-1`.
    struct Fake {
        fail: Option<TrackerErrorKind>,
    }

    impl Fake {
        fn answer<T>(&self, v: T) -> TrackerResult<T> {
            match self.fail {
                Some(k) => Err(TrackerError::new(k, "fake", "token=abc went wrong")),
                None => Ok(v),
            }
        }
    }

    impl TrackerAdapter for Fake {
        fn kind(&self) -> &'static str {
            "fake"
        }
        fn fetch_candidate_issues(&self) -> TrackerResult<Vec<Issue>> {
            self.answer(vec![Issue {
                id: "MT-1".into(),
                ..Issue::default()
            }])
        }
        fn fetch_issue_by_id(&self, id: &str) -> TrackerResult<Issue> {
            self.answer(Issue {
                id: id.into(),
                identifier: id.into(),
                ..Issue::default()
            })
        }
        fn fetch_issues_by_states(&self, _: &[String]) -> TrackerResult<Vec<Issue>> {
            self.answer(Vec::new())
        }
        fn fetch_issue_states_by_ids(
            &self,
            _: &[String],
        ) -> TrackerResult<BTreeMap<String, String>> {
            self.answer(BTreeMap::new())
        }
        fn fetch_issue_states_by_identifiers(
            &self,
            _: &[String],
        ) -> TrackerResult<BTreeMap<String, String>> {
            self.answer(BTreeMap::new())
        }
        fn fetch_issue_comments(&self, _: &str) -> TrackerResult<Vec<Comment>> {
            self.answer(Vec::new())
        }
        fn transition_issue(&self, _: &str, _: &str) -> TrackerResult<()> {
            self.answer(())
        }
        fn comment_issue(&self, _: &str, _: &str) -> TrackerResult<()> {
            self.answer(())
        }
        fn add_label(&self, _: &str, _: &str) -> TrackerResult<()> {
            self.answer(())
        }
        fn remove_label(&self, _: &str, _: &str) -> TrackerResult<()> {
            self.answer(())
        }
        fn fetch_blockers(&self, _: &str) -> TrackerResult<Blockers> {
            self.answer(Blockers::default())
        }
        /// `MT-<n>` and the number `<n>` name `MT-<n>`; anything else is out of scope.
        fn resolve_in_scope(&self, id: &str) -> TrackerResult<crate::domain::IssueRef> {
            let n = id.strip_prefix("MT-").unwrap_or(id);
            if !scope::is_number(n) {
                return Err(scope::refusal("fake", id, "not an MT issue"));
            }
            self.answer(crate::domain::IssueRef {
                id: format!("MT-{n}"),
                identifier: format!("MT-{n}"),
            })
        }
    }

    fn tool(fail: Option<TrackerErrorKind>) -> TrackerApiTool {
        TrackerApiTool {
            tracker: Arc::new(Fake { fail }),
        }
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn tracker_failures_map_to_the_error_kinds() {
        for (kind, name) in [
            (TrackerErrorKind::Transport, "tracker_transport_error"),
            (TrackerErrorKind::Auth, "tracker_auth_error"),
            (TrackerErrorKind::Api, "tracker_api_error"),
            (TrackerErrorKind::NotFound, "tracker_not_found"),
            (TrackerErrorKind::Payload, "tracker_payload_error"),
        ] {
            let out = tool(Some(kind))
                .call(&args(json!({"operation": "search_issues"})))
                .unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(out["success"], false);
            assert_eq!(out["error"]["kind"], name);
            assert!(out["error"]["message"].is_string());
        }
        // A failure sortie caused is an internal error, flagged as such.
        let internal = tool(Some(TrackerErrorKind::UnsupportedTrackerKind))
            .call(&args(json!({"operation": "search_issues"})));
        assert!(
            matches!(internal, Err(ToolError::Failed(v)) if v["error"]["kind"] == "internal_error")
        );
    }

    #[test]
    fn operations_check_their_inputs_before_the_tracker() {
        let t = tool(None);
        let ok = t
            .call(&args(
                json!({"operation": "fetch_issue", "issue_id": " MT-3 "}),
            ))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(ok["data"]["id"], "MT-3");
        let moved = t
            .call(&args(json!({"operation": "transition_issue", "issue_id": "MT-3", "target_state": "Done"})))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(moved["data"], json!({"transitioned": true}));
        let kind = |a: Value| {
            t.call(&args(a))
                .map(|v| v["error"]["kind"].as_str().unwrap_or_default().to_string())
                .unwrap_or_else(|e| panic!("{e:?}"))
        };
        assert_eq!(
            kind(json!({"operation": "fetch_comments"})),
            "invalid_input"
        );
        assert_eq!(
            kind(json!({"operation": "fetch_issue", "issue_id": "  "})),
            "invalid_input"
        );
        assert_eq!(
            kind(json!({"operation": "transition_issue", "issue_id": "MT-3", "target_state": ""})),
            "invalid_input"
        );
        assert_eq!(kind(json!({"operation": "nope"})), "unsupported_operation");
        for bad in [
            json!({}),
            json!({"operation": null}),
            json!({"operation": "fetch_issue", "issue_id": 5}),
            json!({"operation": "fetch_issue", "state": "x"}),
        ] {
            assert!(
                matches!(
                    t.call(&args(bad.clone())),
                    Err(ToolError::InvalidArguments(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn operations_act_on_the_resolved_id_and_refusals_are_protocol_errors() {
        let t = tool(None);
        let ok = t
            .call(&args(json!({"operation": "fetch_issue", "issue_id": "7"})))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            ok["data"]["id"], "MT-7",
            "the tracker's id, not the spelling"
        );
        for op in ["fetch_issue", "fetch_comments", "transition_issue"] {
            let out = t.call(&args(
                json!({"operation": op, "issue_id": "OTHER-9", "target_state": "Done"}),
            ));
            match out {
                Err(ToolError::Refused { message, data }) => {
                    assert!(
                        message.starts_with("project_scope_violation: "),
                        "{message}"
                    );
                    assert!(message.contains("rule: "), "{message}");
                    assert_eq!(data["kind"], "project_scope_violation");
                    assert_eq!(data["rule"], scope::RULE);
                }
                other => panic!("{op}: {other:?}"),
            }
        }
        // A tracker failure while resolving is the tool's own failure envelope.
        let out = tool(Some(TrackerErrorKind::NotFound))
            .call(&args(
                json!({"operation": "fetch_issue", "issue_id": "MT-1"}),
            ))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(out["error"]["kind"], "tracker_not_found");
    }
}
