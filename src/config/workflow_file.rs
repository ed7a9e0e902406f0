//! Splitting WORKFLOW.md into YAML front matter and prompt body, and decoding the front matter
//! into a JSON map that the typed config is built from (so error messages can name the line).

use std::path::Path;

use serde_json::{Map, Number, Value};

use super::coerce::type_name;
use super::error::ConfigError;

/// Largest WORKFLOW.md accepted (template parsing takes ~170× the text in memory).
pub const MAX_WORKFLOW_BYTES: u64 = 2 * 1024 * 1024;

/// Why a file could not be read as text; each names the real cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileReadError {
    NotFound(String),
    /// Permission denied, not a regular file, too large, bad encoding or another I/O error.
    Unreadable(String),
}

/// Reads a regular file of at most `max` bytes without blocking on special files: the file is
/// opened with `O_NONBLOCK` (so a FIFO without writer does not hang the open) and the opened
/// descriptor's metadata must say "regular file" before anything is read.
pub fn read_regular_file(path: &Path, max: u64) -> Result<Vec<u8>, FileReadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FileReadError::NotFound(e.to_string()),
            std::io::ErrorKind::PermissionDenied => {
                FileReadError::Unreadable(format!("permission denied ({e})"))
            }
            _ => FileReadError::Unreadable(e.to_string()),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| FileReadError::Unreadable(e.to_string()))?;
    if !meta.is_file() {
        return Err(FileReadError::Unreadable(format!(
            "not a regular file (it is {})",
            file_kind(&meta.file_type())
        )));
    }
    if meta.len() > max {
        return Err(FileReadError::Unreadable(format!(
            "file is too large: {} bytes (the limit is {max} bytes)",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // Read one byte past the limit to catch a file that grew since the metadata was taken.
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileReadError::Unreadable(e.to_string()))?;
    if bytes.len() as u64 > max {
        return Err(FileReadError::Unreadable(format!(
            "file is too large: more than {max} bytes"
        )));
    }
    Ok(bytes)
}

fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "not a regular file"
    }
}

/// Why file bytes are not text sortie reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// UTF-16 (by its byte-order mark) with an odd number of bytes.
    OddUtf16 {
        little_endian: bool,
    },
    InvalidUtf16(std::char::DecodeUtf16Error),
    /// A NUL byte on `line` (1-based) of what is read as UTF-8.
    NulByte {
        line: usize,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::OddUtf16 { little_endian } => write!(
                f,
                "UTF-16 {} text has an odd number of bytes (truncated?)",
                if *little_endian { "LE" } else { "BE" }
            ),
            DecodeError::InvalidUtf16(e) => write!(f, "invalid UTF-16 text: {e}"),
            DecodeError::NulByte { line } => write!(
                f,
                "line {line}: contains a NUL byte (UTF-16 without a byte-order mark, or binary data?); save the file as UTF-8"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes file bytes as text: a UTF-8 BOM is dropped, UTF-16 with a BOM (LE or BE) is
/// decoded; NUL bytes otherwise (UTF-16 without a BOM, binary data) are refused with their
/// line. Other invalid UTF-8 is replaced, as before.
pub fn decode_text(bytes: &[u8]) -> Result<String, DecodeError> {
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return decode_utf8(rest);
    }
    let le = bytes.starts_with(&[0xFF, 0xFE]);
    if le || bytes.starts_with(&[0xFE, 0xFF]) {
        let body = &bytes[2..];
        if !body.len().is_multiple_of(2) {
            return Err(DecodeError::OddUtf16 { little_endian: le });
        }
        let units = body.chunks_exact(2).map(|c| {
            if le {
                u16::from_le_bytes([c[0], c[1]])
            } else {
                u16::from_be_bytes([c[0], c[1]])
            }
        });
        let text: Result<String, _> = char::decode_utf16(units).collect();
        return text
            .map_err(DecodeError::InvalidUtf16)
            .and_then(|t| decode_utf8(t.as_bytes()));
    }
    decode_utf8(bytes)
}

fn decode_utf8(bytes: &[u8]) -> Result<String, DecodeError> {
    if let Some(pos) = bytes.iter().position(|b| *b == 0) {
        let line = 1 + bytes[..pos].iter().filter(|b| **b == b'\n').count();
        return Err(DecodeError::NulByte { line });
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// The two halves of a workflow file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitWorkflow {
    /// The YAML text between the delimiters; `None` when the file has no front matter.
    pub yaml: Option<String>,
    /// The prompt body, trimmed both ends.
    pub prompt: String,
    /// Lines before the prompt body starts (opening + YAML lines + closing); template error
    /// line numbers add this.
    pub front_matter_lines: usize,
}

/// Splits file content. Strips one BOM and normalizes CRLF and CR-only line ends first. A missing closing delimiter
/// makes everything YAML with an empty prompt (YAML errors then mention the delimiter).
pub fn split_front_matter(content: &str) -> SplitWorkflow {
    let content = content.strip_prefix('\u{feff}').unwrap_or(content);
    let content = content.replace("\r\n", "\n").replace('\r', "\n");
    let Some(first_nl) = content.find('\n') else {
        return no_front_matter(&content);
    };
    if content[..first_nl].trim_end_matches([' ', '\t']) != "---" {
        return no_front_matter(&content);
    }
    let rest = &content[first_nl + 1..];
    let mut offset = 0;
    let mut closing: Option<(usize, usize)> = None;
    for line in rest.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        if body.trim_end_matches([' ', '\t']) == "---" {
            closing = Some((offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    match closing {
        Some((start, end)) => {
            let yaml = &rest[..start];
            SplitWorkflow {
                yaml: Some(yaml.to_string()),
                prompt: rest[end..].trim().to_string(),
                front_matter_lines: 1 + yaml.matches('\n').count() + 1,
            }
        }
        None => SplitWorkflow {
            yaml: Some(rest.to_string()),
            prompt: String::new(),
            front_matter_lines: 1 + rest.matches('\n').count(),
        },
    }
}

/// When the first non-blank line is the `---` delimiter but blank lines come before it, the
/// reason the front matter was not recognized, naming the line.
pub fn misplaced_opening(content: &str) -> Option<String> {
    let content = content.strip_prefix('\u{feff}').unwrap_or(content);
    let content = content.replace("\r\n", "\n").replace('\r', "\n");
    for (i, line) in content.split('\n').enumerate() {
        let body = line.trim();
        if body.is_empty() {
            continue;
        }
        return (i > 0 && body == "---").then(|| {
            format!(
                "the opening '---' is on line {}, but it must be line 1 (line 1 is blank)",
                i + 1
            )
        });
    }
    None
}

fn no_front_matter(content: &str) -> SplitWorkflow {
    SplitWorkflow {
        yaml: None,
        prompt: content.trim().to_string(),
        front_matter_lines: 0,
    }
}

/// Decodes front matter into a JSON-shaped map. Empty or comment-only YAML is `{}`.
/// `line_offset` is the number of file lines before the YAML text (1: the opening `---`),
/// added to every line number the YAML error mentions.
pub fn decode_front_matter(
    yaml: &str,
    path: &Path,
    line_offset: usize,
) -> Result<Map<String, Value>, ConfigError> {
    let value: serde_yaml::Value = serde_yaml::from_str(yaml).map_err(|e| {
        let line = e.location().map(|l| l.line() + line_offset);
        ConfigError::Parse {
            path: path.to_path_buf(),
            line,
            message: shift_line_numbers(&e.to_string(), line_offset),
        }
    })?;
    match yaml_to_json(value) {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => Ok(m),
        other => Err(ConfigError::FrontMatterNotMap {
            path: path.to_path_buf(),
            got: type_name(&other).to_string(),
            line: line_offset
                + 1
                + yaml
                    .lines()
                    .take_while(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
                    .count(),
        }),
    }
}

/// Rewrites every `line N` in a YAML error message to count lines of the whole file.
fn shift_line_numbers(msg: &str, offset: usize) -> String {
    const KEY: &str = "line ";
    let mut out = String::with_capacity(msg.len() + 8);
    let mut rest = msg;
    while let Some(pos) = rest.find(KEY) {
        let (head, tail) = rest.split_at(pos + KEY.len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        match tail[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&tail[..digits]),
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// YAML → JSON value. Non-string map keys are stringified (Go decodes into `map[string]any`);
/// tags are dropped; non-finite floats become null.
pub fn yaml_to_json(v: serde_yaml::Value) -> Value {
    match v {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(b),
        serde_yaml::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else {
                n.as_f64()
                    .and_then(Number::from_f64)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
        }
        serde_yaml::Value::String(s) => Value::String(s),
        serde_yaml::Value::Sequence(items) => {
            Value::Array(items.into_iter().map(yaml_to_json).collect())
        }
        serde_yaml::Value::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match yaml_to_json(k) {
                    Value::String(s) => s,
                    Value::Null => "null".to_string(),
                    other => other.to_string(),
                };
                out.insert(key, yaml_to_json(v));
            }
            Value::Object(out)
        }
        serde_yaml::Value::Tagged(t) => yaml_to_json(t.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_front_matter_and_counts_lines() {
        let s = split_front_matter("---\na: 1\nb: 2\n---\n\n Hello {{ .x }}\n\n");
        assert_eq!(s.yaml.as_deref(), Some("a: 1\nb: 2\n"));
        assert_eq!(s.prompt, "Hello {{ .x }}");
        assert_eq!(s.front_matter_lines, 4);
    }

    #[test]
    fn bom_and_crlf_are_normalized() {
        let s = split_front_matter("\u{feff}---\r\na: 1\r\n---\r\nBody\r\nmore\r\n");
        assert_eq!(s.yaml.as_deref(), Some("a: 1\n"));
        assert_eq!(s.prompt, "Body\nmore");
        assert_eq!(s.front_matter_lines, 3);
    }

    #[test]
    fn cr_only_line_ends_are_normalized() {
        let s = split_front_matter("---\ra: 1\r---\rBody\rmore\r");
        assert_eq!(s.yaml.as_deref(), Some("a: 1\n"));
        assert_eq!(s.prompt, "Body\nmore");
    }

    #[test]
    fn text_decoding_names_the_cause() {
        assert_eq!(decode_text(b"\xEF\xBB\xBFab").as_deref(), Ok("ab"));
        assert_eq!(decode_text(b"\xFF\xFEa\0b\0").as_deref(), Ok("ab"));
        assert_eq!(decode_text(b"\xFE\xFF\0a\0b").as_deref(), Ok("ab"));
        let e = decode_text(b"\xFF\xFEa\0b").unwrap_err();
        assert!(e.to_string().contains("odd number of bytes"), "{e}");
        let e = decode_text(b"x\ny\0").unwrap_err();
        assert!(
            e.to_string().starts_with("line 2: contains a NUL byte"),
            "{e}"
        );
    }

    #[test]
    fn a_late_opening_delimiter_is_named() {
        let r = misplaced_opening("\n  \n---\na: 1\n---\n");
        assert_eq!(
            r.as_deref(),
            Some("the opening '---' is on line 3, but it must be line 1 (line 1 is blank)")
        );
        assert_eq!(misplaced_opening("---\na: 1\n"), None);
        assert_eq!(misplaced_opening("prompt\n---\n"), None);
    }

    #[test]
    fn delimiters_may_carry_trailing_blanks() {
        let s = split_front_matter("--- \t\na: 1\n---  \nBody");
        assert_eq!(s.yaml.as_deref(), Some("a: 1\n"));
        assert_eq!(s.prompt, "Body");
    }

    #[test]
    fn no_front_matter_when_first_line_differs() {
        for text in [
            "  ---\na: 1\n---\nx",
            "--- x\nbody",
            "---",
            "just a prompt\n",
        ] {
            let s = split_front_matter(text);
            assert_eq!(s.yaml, None, "{text:?}");
            assert_eq!(s.front_matter_lines, 0);
            assert_eq!(s.prompt, text.trim());
        }
    }

    #[test]
    fn unterminated_front_matter_is_all_yaml() {
        let s = split_front_matter("---\na: 1\nb: 2\n");
        assert_eq!(s.yaml.as_deref(), Some("a: 1\nb: 2\n"));
        assert_eq!(s.prompt, "");
        assert_eq!(s.front_matter_lines, 3);
    }

    #[test]
    fn empty_front_matter_decodes_to_empty_map() {
        let s = split_front_matter("---\n---\nBody");
        assert_eq!(s.yaml.as_deref(), Some(""));
        assert_eq!(s.front_matter_lines, 2);
        let p = Path::new("/w/WORKFLOW.md");
        assert!(decode_front_matter("", p, 1).unwrap().is_empty());
        assert!(
            decode_front_matter("# only a comment\n", p, 1)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn non_map_front_matter_is_rejected() {
        let p = Path::new("/w/WORKFLOW.md");
        let e = decode_front_matter("- a\n- b\n", p, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "workflow front matter in /w/WORKFLOW.md must be a YAML map: got []interface {} (line 2)"
        );
        let e = decode_front_matter("hello\n", p, 1).unwrap_err();
        assert!(e.to_string().ends_with("got string (line 2)"), "{e}");
    }

    #[test]
    fn syntax_error_line_counts_from_file_start() {
        let p = Path::new("/w/WORKFLOW.md");
        // The bad line is YAML line 3, which is file line 4 after the opening `---`.
        let e = decode_front_matter("a: 1\nb: 2\nc: [1, 2\n", p, 1).unwrap_err();
        let ConfigError::Parse { line, message, .. } = &e else {
            panic!("expected a parse error, got {e:?}");
        };
        assert!(line.is_some_and(|l| l >= 4), "{line:?} {message}");
        let text = e.to_string();
        assert!(
            text.starts_with("failed to parse YAML front matter in /w/WORKFLOW.md (did you forget the closing '---' delimiter?): "),
            "{text}"
        );
        assert!(
            text.contains(&format!("line {}", line.unwrap_or(0))),
            "{text}"
        );
    }

    #[test]
    fn shifts_every_line_number() {
        assert_eq!(
            shift_line_numbers(
                "bad at line 3 column 2, while parsing at line 1 column 1",
                1
            ),
            "bad at line 4 column 2, while parsing at line 2 column 1"
        );
        assert_eq!(shift_line_numbers("no location", 5), "no location");
    }

    #[test]
    fn yaml_values_convert_to_json() {
        let v: serde_yaml::Value =
            serde_yaml::from_str("a: 1\nb: 2.5\n3: x\nc: [true, null]\nd: !tag 7\n").unwrap();
        let j = yaml_to_json(v);
        assert_eq!(
            j,
            serde_json::json!({"a": 1, "b": 2.5, "3": "x", "c": [true, null], "d": 7})
        );
    }
}
