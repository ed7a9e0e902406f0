//! Small text-shaping helpers shared by the parsers: rune-bounded cuts, control-character
//! cleanup, ANSI stripping.

/// The longest event message (and tool argument) kept and served, in chars, before `…`.
pub const MESSAGE_CHARS: usize = 999;

/// Cuts `s` to at most `max` chars (Unicode scalar values), adding `…` when cut.
pub fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((idx, _)) => format!("{}…", &s[..idx]),
    }
}

/// Replaces every control character (including newlines) with a space.
pub fn controls_to_spaces(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Removes ANSI CSI escape sequences (`ESC [ … final-byte`) and lone escapes.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Keeps the first line and the tail of a long text, so both the headline and the final
/// error survive: `first line\n...\n<tail>`, at most about `max_bytes`.
pub fn head_and_tail(s: &str, max_bytes: usize) -> String {
    if s.len() <= max_bytes {
        return s.to_string();
    }
    let first = s.lines().next().unwrap_or("");
    let first = floor_prefix(first, max_bytes / 2);
    let budget = max_bytes.saturating_sub(first.len() + 5);
    let mut start = s.len().saturating_sub(budget);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("{first}\n...\n{}", &s[start..])
}

fn floor_prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(cut_chars("héllo", 2), "hé…");
        assert_eq!(cut_chars("hé", 2), "hé");
    }

    #[test]
    fn strips_ansi_sequences() {
        assert_eq!(strip_ansi("\u{1b}[31merror\u{1b}[0m x"), "error x");
    }

    #[test]
    fn long_text_keeps_first_line_and_tail() {
        let s = format!("headline\n{}\nfinal error", "x".repeat(5000));
        let out = head_and_tail(&s, 2048);
        assert!(out.starts_with("headline\n...\n"));
        assert!(out.ends_with("final error"));
        assert!(out.len() <= 2048 + 16);
    }
}
