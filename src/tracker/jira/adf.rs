//! Atlassian Document Format, Jira Cloud's rich-text JSON: flattened to plain text for
//! descriptions and comments, and built from plain text for the comments sortie posts.

use serde_json::{Value, json};

/// Nodes that end a line of text once their children are written.
const BLOCKS: &[&str] = &[
    "paragraph",
    "heading",
    "bulletList",
    "orderedList",
    "listItem",
    "blockquote",
    "codeBlock",
    "rule",
    "mediaSingle",
    "mediaGroup",
    "table",
    "tableRow",
    "tableCell",
    "tableHeader",
    "panel",
    "decisionList",
    "decisionItem",
    "taskList",
    "taskItem",
];

/// The text of an ADF document, depth first; anything that is not a document node is `""`.
/// Plain strings (older API versions) pass through.
pub fn to_text(doc: &Value) -> String {
    if let Some(s) = doc.as_str() {
        return s.to_string();
    }
    let mut out = String::new();
    walk(doc, &mut out);
    out.trim_end_matches(['\n', ' ']).to_string()
}

fn walk(node: &Value, out: &mut String) {
    let Some(obj) = node.as_object() else {
        return;
    };
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind == "text" {
        out.push_str(obj.get("text").and_then(Value::as_str).unwrap_or_default());
    }
    if let Some(children) = obj.get("content").and_then(Value::as_array) {
        for child in children {
            walk(child, out);
        }
    }
    if BLOCKS.contains(&kind) {
        out.push('\n');
    }
}

/// A document with one paragraph per line of `text` (an empty line is an empty paragraph).
pub fn from_text(text: &str) -> Value {
    let paragraphs: Vec<Value> = text
        .split('\n')
        .map(|line| line.trim_end_matches('\r'))
        .map(|line| {
            if line.is_empty() {
                json!({"type": "paragraph", "content": []})
            } else {
                json!({"type": "paragraph", "content": [{"type": "text", "text": line}]})
            }
        })
        .collect();
    json!({"version": 1, "type": "doc", "content": paragraphs})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_description_flattens_to_the_golden_text() {
        let doc: Value = serde_json::from_str(include_str!(
            "../../../tests/fixtures/jira/adf_description.json"
        ))
        .unwrap_or(Value::Null);
        assert_eq!(
            to_text(&doc),
            "Overview\nThis is the main description of the task.\nItem one\n\nItem two\n\n\necho hello\nInside unknown"
        );
    }

    #[test]
    fn garbage_and_null_are_empty() {
        assert_eq!(to_text(&Value::Null), "");
        assert_eq!(to_text(&json!(42)), "");
        assert_eq!(to_text(&json!({"content": "nope"})), "");
        assert_eq!(to_text(&json!("plain")), "plain");
    }

    #[test]
    fn text_becomes_paragraphs_and_reads_back() {
        let doc = from_text("one\n\nthree");
        assert_eq!(doc["content"].as_array().map(Vec::len), Some(3));
        assert_eq!(
            doc["content"][1],
            json!({"type": "paragraph", "content": []})
        );
        assert_eq!(doc["content"][2]["content"][0]["text"], "three");
        assert_eq!(to_text(&doc), "one\n\nthree");
    }
}
