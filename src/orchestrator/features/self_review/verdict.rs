//! The verdict a review turn leaves in `.sortie/review_verdict.json`:
//! `{"verdict": "pass" | "iterate", "summary": "…", "issues": [{"file", "line", "severity",
//! "message"}]}`. Read through the safe `.sortie` reader, capped; anything else is no verdict,
//! with the reason kept for the fix turn and the audit trail.

use std::path::Path;

use serde_json::Value;

use crate::agent::{sortie_file, text::cut_chars};

/// The verdict file's name inside `.sortie`.
pub const VERDICT_FILE: &str = "review_verdict.json";
/// Largest verdict file read.
pub const MAX_VERDICT_BYTES: u64 = 64 * 1024;
/// Findings kept from one verdict.
const MAX_FINDINGS: usize = 50;
/// Longest summary or finding text kept, in chars.
const MAX_TEXT_CHARS: usize = 1_000;

/// What the reviewer decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictWord {
    /// The changes are ready.
    Pass,
    /// The changes need another fix.
    Iterate,
}

impl VerdictWord {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictWord::Pass => "pass",
            VerdictWord::Iterate => "iterate",
        }
    }
}

/// One problem the reviewer named.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Finding {
    pub file: String,
    /// `None` when the reviewer named no line (or not a positive integer).
    pub line: Option<u64>,
    pub severity: String,
    pub message: String,
}

/// A parsed verdict file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub word: VerdictWord,
    pub summary: String,
    pub findings: Vec<Finding>,
}

/// Why a review turn left no usable verdict. The text goes into the fix turn's prompt and
/// (masked) into the iteration's `verdict_error`; the review is then judged by its commands
/// alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerdictError {
    /// No verdict file was written.
    NotWritten,
    /// The `.sortie` reader refused the file (a link, too large, unreadable).
    Refused(crate::agent::path_error::PathError),
    /// The content is not JSON; the parser's message.
    NotJson(String),
    NotObject,
    NoVerdictMember,
    VerdictNotString,
    /// A verdict word other than `pass` or `iterate` (its first 40 chars).
    Unrecognized(String),
}

impl std::fmt::Display for VerdictError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerdictError::NotWritten => write!(f, "no .sortie/{VERDICT_FILE} was written"),
            VerdictError::Refused(reason) => write!(f, "verdict file refused: {reason}"),
            VerdictError::NotJson(e) => write!(f, "verdict file is not valid JSON: {e}"),
            VerdictError::NotObject => f.write_str("verdict file is not a JSON object"),
            VerdictError::NoVerdictMember => f.write_str("the verdict file has no verdict member"),
            VerdictError::VerdictNotString => f.write_str("the verdict member is not a string"),
            VerdictError::Unrecognized(word) => write!(
                f,
                "unrecognized verdict {word:?} (expected \"pass\" or \"iterate\")"
            ),
        }
    }
}

impl std::error::Error for VerdictError {}

/// Reads the verdict the last review turn wrote; `Err` says why there is none.
pub fn read(workspace: &Path) -> Result<Verdict, VerdictError> {
    match sortie_file::read(workspace, VERDICT_FILE, MAX_VERDICT_BYTES) {
        Ok(Some(bytes)) => parse(&bytes),
        Ok(None) => Err(VerdictError::NotWritten),
        Err(reason) => Err(VerdictError::Refused(reason)),
    }
}

/// Parses verdict file content (pure). The verdict word is trimmed and case-folded; every
/// other member is optional and bounded.
pub fn parse(bytes: &[u8]) -> Result<Verdict, VerdictError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| VerdictError::NotJson(e.to_string()))?;
    let Value::Object(map) = value else {
        return Err(VerdictError::NotObject);
    };
    let word = match map.get("verdict") {
        Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "pass" => VerdictWord::Pass,
            "iterate" => VerdictWord::Iterate,
            other => return Err(VerdictError::Unrecognized(cut_chars(other, 40))),
        },
        Some(_) => return Err(VerdictError::VerdictNotString),
        None => return Err(VerdictError::NoVerdictMember),
    };
    let findings = match map.get("issues") {
        Some(Value::Array(items)) => items.iter().take(MAX_FINDINGS).map(finding).collect(),
        _ => Vec::new(),
    };
    Ok(Verdict {
        word,
        summary: text(map.get("summary")),
        findings,
    })
}

fn finding(v: &Value) -> Finding {
    Finding {
        file: text(v.get("file")),
        line: v.get("line").and_then(Value::as_u64).filter(|l| *l > 0),
        severity: text(v.get("severity")),
        message: text(v.get("message")),
    }
}

/// A string member, cleaned of control characters other than newlines and bounded; `""` when
/// absent or not a string.
fn text(v: Option<&Value>) -> String {
    let Some(Value::String(s)) = v else {
        return String::new();
    };
    let kept: String = crate::agent::text::strip_ansi(s)
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .collect();
    cut_chars(kept.trim(), MAX_TEXT_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_and_iterate_parse_with_their_findings() {
        let v = parse(br#"{"verdict": " PASS\n", "summary": "looks good", "issues": []}"#);
        assert_eq!(
            v.map(|v| (v.word, v.summary)),
            Ok((VerdictWord::Pass, "looks good".into()))
        );
        let v = parse(
            br#"{"verdict": "iterate", "issues": [
                {"file": "src/a.rs", "line": 42, "severity": "error", "message": "off by one"},
                {"file": "src/b.rs", "line": -3, "message": "\u001b[31mred\u0007"},
                "not an object"
            ]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.word, VerdictWord::Iterate);
        assert_eq!(v.summary, "");
        assert_eq!(v.findings.len(), 3);
        assert_eq!(v.findings[0].line, Some(42));
        assert_eq!(v.findings[0].message, "off by one");
        assert_eq!(v.findings[1].line, None);
        assert_eq!(v.findings[1].message, "red");
        assert_eq!(v.findings[2], Finding::default());
    }

    #[test]
    fn anything_else_is_no_verdict_with_a_reason() {
        for (body, reason) in [
            (&b"not json"[..], "not valid JSON"),
            (b"[1]", "not a JSON object"),
            (b"{}", "no verdict member"),
            (br#"{"verdict": true}"#, "not a string"),
            (
                br#"{"verdict": "approve"}"#,
                "unrecognized verdict \"approve\"",
            ),
        ] {
            let e = parse(body).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(reason), "{e}");
        }
    }

    #[test]
    fn findings_and_texts_are_bounded() {
        let issues: Vec<String> = (0..80)
            .map(|_| format!(r#"{{"message": "{}"}}"#, "x".repeat(5000)))
            .collect();
        let body = format!(
            r#"{{"verdict": "iterate", "issues": [{}]}}"#,
            issues.join(",")
        );
        let v = parse(body.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.findings.len(), MAX_FINDINGS);
        assert_eq!(v.findings[0].message.chars().count(), MAX_TEXT_CHARS + 1);
    }

    #[test]
    fn the_file_is_read_safely() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let read_text = |d: &Path| read(d).map_err(|e| e.to_string());
        assert!(read_text(d.path()).is_err_and(|e| e.contains("no .sortie/review_verdict.json")));
        sortie_file::write(d.path(), VERDICT_FILE, br#"{"verdict": "pass"}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(d.path()).map(|v| v.word), Ok(VerdictWord::Pass));
        let big = vec![b' '; MAX_VERDICT_BYTES as usize + 1];
        sortie_file::write(d.path(), VERDICT_FILE, &big).unwrap_or_else(|e| panic!("{e}"));
        assert!(read_text(d.path()).is_err_and(|e| e.contains("refused")));
    }
}
