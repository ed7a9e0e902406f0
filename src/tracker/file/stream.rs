//! The tracker file's top-level array walked one element at a time, and written back the same
//! way. A rewrite used to parse the whole document into one `serde_json::Value` tree (about
//! ten times the file's size in small allocations: 5 MB of issues became some 60 MB) and
//! serialize it into one buffer, which left the allocator holding that much after every
//! hand-off. Here only one element is alive at a time, and the output streams to the file.
//! The bytes written are those of `serde_json::to_vec_pretty` over the whole array.

use std::io::{self, Write};

use serde::Deserializer as _;
use serde::de::{Error as _, SeqAccess, Visitor};
use serde_json::Value;

/// Why a walk stopped early.
#[derive(Debug)]
pub enum WalkError {
    /// The text is not one JSON array (the caller re-parses it whole for the exact message).
    Json(serde_json::Error),
    /// The callback failed (a write).
    Io(io::Error),
}

/// Calls `each(index, element)` for every element of the top-level array, in order, with one
/// element alive at a time. The text must be exactly one JSON array.
pub fn walk<F>(text: &str, mut each: F) -> Result<(), WalkError>
where
    F: FnMut(usize, Value) -> io::Result<()>,
{
    let mut de = serde_json::Deserializer::from_str(text);
    let mut failed = None;
    let parsed = de
        .deserialize_seq(Elements {
            each: &mut each,
            failed: &mut failed,
        })
        .and_then(|()| de.end());
    match (failed, parsed) {
        (Some(e), _) => Err(WalkError::Io(e)),
        (None, Err(e)) => Err(WalkError::Json(e)),
        (None, Ok(())) => Ok(()),
    }
}

struct Elements<'a, F> {
    each: &'a mut F,
    failed: &'a mut Option<io::Error>,
}

impl<'de, F> Visitor<'de> for Elements<'_, F>
where
    F: FnMut(usize, Value) -> io::Result<()>,
{
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some(element) = seq.next_element::<Value>()? {
            if let Err(e) = (self.each)(index, element) {
                *self.failed = Some(e);
                return Err(A::Error::custom("write failed"));
            }
            index += 1;
        }
        Ok(())
    }
}

/// Writes a top-level array element by element, 2-space pretty-printed with a trailing
/// newline, byte for byte what `to_vec_pretty` of the whole array plus `\n` gives.
pub struct ArrayWriter<W: Write> {
    out: W,
    /// One element's standalone pretty form, reused between elements.
    scratch: Vec<u8>,
    started: bool,
}

impl<W: Write> ArrayWriter<W> {
    pub fn new(out: W) -> ArrayWriter<W> {
        ArrayWriter {
            out,
            scratch: Vec::new(),
            started: false,
        }
    }

    /// Appends one element. Nested one level down, an element's pretty form is its standalone
    /// form with two more spaces after every line break (JSON strings escape their line
    /// breaks, so every `\n` in that form is the formatter's).
    pub fn push(&mut self, element: &Value) -> io::Result<()> {
        self.scratch.clear();
        serde_json::to_writer_pretty(&mut self.scratch, element)?;
        self.out
            .write_all(if self.started { b",\n  " } else { b"[\n  " })?;
        self.started = true;
        for (i, line) in self.scratch.split(|&b| b == b'\n').enumerate() {
            if i > 0 {
                self.out.write_all(b"\n  ")?;
            }
            self.out.write_all(line)?;
        }
        Ok(())
    }

    /// Closes the array and answers the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out
            .write_all(if self.started { b"\n]\n" } else { b"[]\n" })?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rewritten(text: &str) -> Result<String, String> {
        let mut writer = ArrayWriter::new(Vec::new());
        walk(text, |_, v| writer.push(&v)).map_err(|e| format!("{e:?}"))?;
        let bytes = writer.finish().map_err(|e| e.to_string())?;
        String::from_utf8(bytes).map_err(|e| e.to_string())
    }

    fn whole(text: &str) -> String {
        let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        let mut s = serde_json::to_string_pretty(&v).unwrap_or_else(|e| panic!("{e}"));
        s.push('\n');
        s
    }

    #[test]
    fn the_stream_writes_what_the_whole_document_would() {
        let doc = json!([
            {"z": {"nested": [1, 2.5, null, "a\nb", {}, []]}, "id": "1", "e": {}, "a": []},
            [],
            "text",
            3,
            {"id": "2", "comments": [{"body": "x  y\n  z"}], "labels": ["A", "b"]},
            null
        ]);
        for text in [doc.to_string(), "[]".into(), " [ ] ".into(), "[{}]".into()] {
            assert_eq!(rewritten(&text), Ok(whole(&text)), "{text}");
        }
    }

    #[test]
    fn elements_come_one_at_a_time_in_order() {
        let mut seen = Vec::new();
        let r = walk(r#"[{"id": "a"}, 2, {"id": "b", "id": "c"}]"#, |i, v| {
            seen.push((i, v));
            Ok(())
        });
        assert!(r.is_ok());
        assert_eq!(
            seen,
            vec![
                (0, json!({"id": "a"})),
                (1, json!(2)),
                (2, json!({"id": "c"}))
            ]
        );
    }

    #[test]
    fn anything_but_one_array_is_refused_and_a_failed_write_stops_the_walk() {
        for text in [r#"{"id": "1"}"#, "[1, 2", "[1] x", "", "[1,]"] {
            let r = walk(text, |_, _| Ok(()));
            assert!(matches!(r, Err(WalkError::Json(_))), "{text}");
        }
        let mut calls = 0;
        let r = walk("[1, 2, 3]", |_, _| {
            calls += 1;
            Err(io::Error::other("disk full"))
        });
        assert!(matches!(r, Err(WalkError::Io(_))));
        assert_eq!(calls, 1);
    }
}
