//! Reading `opencode export --sanitize <id>`: the session's records as one JSON document. The
//! last assistant message carries tokens, the provider and model, and a cost.

use crate::agent::event::TokenUsage;
use serde_json::Value;

/// What the export says about the session's last assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportUsage {
    /// `None` when the message has no token counts (or all are zero).
    pub usage: Option<TokenUsage>,
    /// `providerID/modelID`, when both are present.
    pub model: Option<String>,
    /// The USD cost OpenCode computed, when present.
    pub cost: Option<f64>,
}

/// Parses an export document; `None` when it is not JSON or has no assistant message.
pub fn parse_export(text: &str) -> Option<ExportUsage> {
    let doc: Value = serde_json::from_str(text.trim()).ok()?;
    let info = doc
        .get("messages")?
        .as_array()?
        .iter()
        .filter_map(|m| m.get("info"))
        .rfind(|i| i.get("role").and_then(Value::as_str) == Some("assistant"))?;
    Some(ExportUsage {
        usage: info.get("tokens").and_then(normalized_tokens),
        model: model_of(info),
        cost: info.get("cost").and_then(Value::as_f64),
    })
}

/// OpenCode's `tokens{input,output,reasoning,cache{read,write}}` in sortie's terms: `input`
/// excludes the cache, so both cache terms are added back into input; reasoning is output the
/// provider bills as such, so it joins output (then `total` matches OpenCode's own total).
/// `None` when every counter is zero or missing.
pub fn normalized_tokens(tokens: &Value) -> Option<TokenUsage> {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cache = tokens.get("cache");
    let input = n(tokens.get("input"));
    let output = n(tokens.get("output")).saturating_add(n(tokens.get("reasoning")));
    let read = n(cache.and_then(|c| c.get("read")));
    let write = n(cache.and_then(|c| c.get("write")));
    let usage = TokenUsage::from_uncached_input(input, output, read, write);
    (!usage.is_zero()).then_some(usage)
}

/// `providerID/modelID` of a part or message, when both are named.
pub fn model_of(v: &Value) -> Option<String> {
    let provider = v.get("providerID").and_then(Value::as_str)?;
    let model = v.get("modelID").and_then(Value::as_str)?;
    Some(format!("{provider}/{model}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_assistant_message_counts() {
        let doc = json!({"messages": [
            {"info": {"role": "assistant", "tokens": {"input": 1, "output": 1}}},
            {"info": {"role": "assistant", "providerID": "p", "modelID": "m",
                      "tokens": {"input": 10, "output": 5, "reasoning": 2, "cache": {"read": 3, "write": 4}},
                      "cost": 0.5}},
            {"info": {"role": "user"}}
        ]});
        let got = parse_export(&doc.to_string());
        assert_eq!(
            got,
            Some(ExportUsage {
                usage: Some(TokenUsage::new(17, 7, 3, 4)),
                model: Some("p/m".into()),
                cost: Some(0.5),
            })
        );
        assert_eq!(parse_export("not json"), None);
        assert_eq!(parse_export("{\"messages\": []}"), None);
    }
}
