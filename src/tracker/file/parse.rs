//! The tracker file's bytes → normalized issues.
//!
//! A valid file is decoded in one pass straight from its text into typed records, which costs
//! about what parsing it into a `serde_json::Value` costs. Only when that fails does the
//! element-by-element path run, which is slower but names the bad record (`issue [4] (id x):
//! …`) and accepts what a `Value` accepts (a repeated key keeps its last value), so errors and
//! leniency are those of reading each element on its own.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use crate::domain::Issue;
use crate::tracker::TrackerResult;

use super::document::{self, payload};
use super::elements;
use super::index::Element;
use super::record::{self, ObjectRecord};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Decodes the file's bytes into issues in file order (blockers not resolved yet).
pub fn parse_issues(path: &Path, bytes: &[u8]) -> TrackerResult<Vec<Issue>> {
    let text = document::decode_text(path, bytes)?;
    if let Ok(records) = serde_json::from_str::<Vec<ObjectRecord>>(text) {
        // Collected in place, the issues keep the records' larger allocation (about 800
        // bytes an issue instead of 450: 7 MB more for 20,000 issues, kept as long as the
        // parse is cached); shrinking gives the difference back.
        let mut issues: Vec<Issue> = records.into_iter().map(ObjectRecord::into_issue).collect();
        issues.shrink_to_fit();
        return Ok(issues);
    }
    let raw = document::parse_document(path, text)?;
    raw.iter()
        .enumerate()
        .map(|(i, v)| record::normalize_record(i, v))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|cause| payload(format!("failed to parse file: {}: {cause}", path.display())))
}

/// The byte ranges of the file's elements (after a BOM), when it splits cleanly.
pub fn element_spans(bytes: &[u8]) -> Option<Vec<Range<usize>>> {
    let at = if bytes.starts_with(BOM) { BOM.len() } else { 0 };
    let spans = elements::element_spans(bytes.get(at..)?)?;
    Some(
        spans
            .into_iter()
            .map(|r| r.start + at..r.end + at)
            .collect(),
    )
}

/// A new version's elements (`spans` of `bytes`) told against the previous version's (`old`,
/// `old_spans`): an element with the bytes of a previous one (at the same position, else
/// anywhere) is `Same`; only the others are parsed, each on its own. `None` when a changed
/// element does not decode on its own: the whole file is then parsed, which accepts what it
/// accepts and names what it refuses.
pub fn changed_elements(
    bytes: &[u8],
    spans: &[Range<usize>],
    old: &[u8],
    old_spans: &[Range<usize>],
) -> Option<Vec<Element>> {
    let mut by_bytes: Option<HashMap<&[u8], usize>> = None;
    let mut out = Vec::with_capacity(spans.len());
    for (i, span) in spans.iter().enumerate() {
        let new = bytes.get(span.clone())?;
        let in_place = old_spans
            .get(i)
            .is_some_and(|r| old.get(r.clone()) == Some(new));
        let same = if in_place {
            Some(i)
        } else {
            let index = by_bytes.get_or_insert_with(|| {
                let mut m = HashMap::with_capacity(old_spans.len());
                for (j, r) in old_spans.iter().enumerate() {
                    if let Some(b) = old.get(r.clone()) {
                        m.entry(b).or_insert(j);
                    }
                }
                m
            });
            index.get(new).copied()
        };
        out.push(match same {
            Some(j) => Element::Same(j),
            None => {
                let record = serde_json::from_slice::<ObjectRecord>(new).ok()?;
                Element::New(Box::new(record.into_issue()))
            }
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> TrackerResult<Vec<Issue>> {
        parse_issues(Path::new("/x/issues.json"), text.as_bytes())
    }

    fn message(r: TrackerResult<Vec<Issue>>) -> String {
        match r {
            Ok(v) => panic!("expected an error, got {} issues", v.len()),
            Err(e) => e.message,
        }
    }

    #[test]
    fn both_paths_agree_on_a_valid_file() {
        let text = r#"[{"id": "1", "identifier": "P-1", "priority": 2, "labels": ["A"],
            "comments": [{"body": "hi"}], "blocked_by": [{"id": "2"}], "extra": {"x": [1]}},
            {"id": "2", "title": null}]"#;
        let fast = parse(text).ok();
        let raw = document::parse_document(Path::new("/x"), text).ok();
        let slow: Option<Vec<Issue>> = raw.map(|r| {
            r.iter()
                .enumerate()
                .filter_map(|(i, v)| record::normalize_record(i, v).ok())
                .collect()
        });
        assert!(fast.is_some());
        assert_eq!(fast, slow);
    }

    #[test]
    fn an_array_element_is_not_a_record() {
        let m = message(parse(r#"[{"id": "1"}, ["2", "P-2"]]"#));
        assert_eq!(
            m,
            "failed to parse file: /x/issues.json: issue [1]: expected a JSON object"
        );
    }

    #[test]
    fn errors_name_the_record_and_top_level_is_checked() {
        let m = message(parse(r#"[{"id": "1"}, {"id": "x", "title": 5}]"#));
        assert!(
            m.starts_with("failed to parse file: /x/issues.json: issue [1] (id x): "),
            "{m}"
        );
        let m = message(parse(r#"{"id": "1"}"#));
        assert!(
            m.ends_with("top-level value must be an array, found an object"),
            "{m}"
        );
        let m = message(parse_issues(Path::new("/x/issues.json"), b"[\xff]"));
        assert!(
            m.starts_with("failed to read file: /x/issues.json: not valid UTF-8"),
            "{m}"
        );
    }

    #[test]
    fn the_issues_hold_no_spare_room() {
        let text: Vec<String> = (0..100)
            .map(|i| format!(r#"{{"id": "{i}", "title": "t", "labels": ["a"]}}"#))
            .collect();
        let issues = parse(&format!("[{}]", text.join(","))).unwrap_or_default();
        assert_eq!(issues.len(), 100);
        assert_eq!(issues.capacity(), issues.len());
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_and_a_bom_is_skipped() {
        let text = "\u{feff}[{\"id\": \"1\", \"state\": \"To Do\", \"state\": \"Done\"}]";
        let issues = parse(text).ok().unwrap_or_default();
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].state, "Done");
    }
}
