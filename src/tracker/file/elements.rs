//! The tracker file's top-level array split into its elements' bytes without parsing them, so
//! a new version of the file parses only the elements whose bytes changed (see `cache`).
//!
//! The split only finds where each element begins and ends: strings are skipped with their
//! escapes and brackets are counted. It does not judge an element; every element it hands out
//! is either parsed on its own or has the bytes of one that was. Anything it cannot split
//! cleanly (not one array, text after it, nesting deeper than [`MAX_DEPTH`]) answers `None`,
//! and the whole file is parsed instead, which names the problem.

use std::ops::Range;

/// Deeper nesting is left to the whole-file parse, whose recursion limit then applies exactly
/// as it would without the split.
const MAX_DEPTH: usize = 100;

/// The byte ranges of the elements of the top-level array in `b`, in order.
pub fn element_spans(b: &[u8]) -> Option<Vec<Range<usize>>> {
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'[') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let mut spans = Vec::new();
    if b.get(i) == Some(&b']') {
        return only_ws_after(b, i + 1).then_some(spans);
    }
    loop {
        let end = value_end(b, i)?;
        if end == i {
            return None;
        }
        spans.push(i..end);
        i = skip_ws(b, end);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b']' => return only_ws_after(b, i + 1).then_some(spans),
            _ => return None,
        }
    }
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|&c| is_ws(c)) {
        i += 1;
    }
    i
}

fn only_ws_after(b: &[u8], i: usize) -> bool {
    skip_ws(b, i) == b.len()
}

/// Where the value that begins at `i` ends: after its closing bracket or quote, or (a bare
/// scalar) at the first byte that ends one at the top.
fn value_end(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        match *b.get(i)? {
            b'"' => {
                i = string_end(b, i + 1)?;
                if depth == 0 {
                    return Some(i);
                }
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return None;
                }
            }
            b'}' | b']' => {
                if depth == 0 {
                    return Some(i);
                }
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            c if depth == 0 && (c == b',' || is_ws(c)) => return Some(i),
            _ => {}
        }
        i += 1;
    }
}

/// Just after the quote that closes the string whose body begins at `i`.
fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let at = i + memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        if b[at] == b'"' {
            return Some(at + 1);
        }
        i = at + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Option<Vec<&str>> {
        element_spans(text.as_bytes()).map(|spans| spans.into_iter().map(|r| &text[r]).collect())
    }

    #[test]
    fn elements_are_split_where_a_parser_would_split_them() {
        let text = r#" [ {"id": "1", "t": "a, b ] } \" \\"}, [1, [2]] ,"x\"y",3 , null,
            {"n": {"m": []}} ] "#;
        assert_eq!(
            pieces(text),
            Some(vec![
                r#"{"id": "1", "t": "a, b ] } \" \\"}"#,
                "[1, [2]]",
                r#""x\"y""#,
                "3",
                "null",
                r#"{"n": {"m": []}}"#,
            ])
        );
        assert_eq!(pieces("[]"), Some(vec![]));
        assert_eq!(pieces(" [ ]\n"), Some(vec![]));
    }

    #[test]
    fn anything_not_cleanly_one_array_is_left_to_the_whole_parse() {
        for text in [
            "",
            "{}",
            "[1 2]",
            "[1,]",
            "[,1]",
            "[1] x",
            "[\"open",
            "[{\"a\": 1}",
            "[}]",
        ] {
            assert_eq!(element_spans(text.as_bytes()), None, "{text}");
        }
        let deep = format!(
            "[{}{}]",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(element_spans(deep.as_bytes()), None);
    }
}
