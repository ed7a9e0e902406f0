//! The tail of a CI job log as a prompt can use it, without I/O: only the last 1 MiB is looked
//! at, each line loses its leading `YYYY-MM-DDTHH:MM:SS(.fff…)Z ` stamp and its ANSI escape
//! sequences (and other control characters but tab), blank lines are dropped, and the last
//! `max_lines` lines are kept.

/// The most of a log's end that is read.
pub const MAX_LOG_BYTES: usize = 1024 * 1024;

/// The last `max_lines` cleaned lines of `log`, joined by `\n`; empty when `max_lines` is 0.
pub fn tail(log: &[u8], max_lines: usize) -> String {
    if max_lines == 0 {
        return String::new();
    }
    let start = log.len().saturating_sub(MAX_LOG_BYTES);
    let mut window = &log[start..];
    if start > 0 {
        // The first line of a cut window is partial.
        window = match window.iter().position(|b| *b == b'\n') {
            Some(i) => &window[i + 1..],
            None => &[],
        };
    }
    let text = String::from_utf8_lossy(window);
    let mut kept: Vec<String> = text
        .split('\n')
        .map(|l| strip_ansi(strip_timestamp(l)))
        .map(|l| l.trim_end().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if kept.len() > max_lines {
        kept.drain(..kept.len() - max_lines);
    }
    kept.join("\n")
}

/// `line` without a leading `YYYY-MM-DDTHH:MM:SS[.digits]Z ` stamp.
pub fn strip_timestamp(line: &str) -> &str {
    let b = line.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    let shape = digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10)
        && b.get(10) == Some(&b'T')
        && digits(11..13)
        && b.get(13) == Some(&b':')
        && digits(14..16)
        && b.get(16) == Some(&b':')
        && digits(17..19);
    if !shape {
        return line;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    if b.get(i) != Some(&b'Z') {
        return line;
    }
    i += 1;
    match b.get(i) {
        Some(b' ') => &line[i + 1..],
        None => "",
        Some(_) => line,
    }
}

/// `line` without escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ESC \`, `ESC ( B`,
/// other `ESC x`) and without control characters other than tab.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            if c == '\t' || !c.is_control() {
                out.push(c);
            }
            continue;
        }
        match chars.next() {
            Some('[') => {
                // Parameters and intermediates, then one final byte in @..~.
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(n) = chars.next() {
                    if n == '\u{7}' {
                        break;
                    }
                    if n == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            // nF sequences (`ESC ( B`): intermediates, then one final character.
            Some(' '..='/') => {
                for n in chars.by_ref() {
                    if !(' '..='/').contains(&n) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_stripped_only_when_whole() {
        assert_eq!(
            strip_timestamp("2026-01-15T10:30:00.1234567Z hello"),
            "hello"
        );
        assert_eq!(strip_timestamp("2026-01-15T10:30:00Z hello"), "hello");
        assert_eq!(strip_timestamp("2026-01-15T10:30:04.5678901Z "), "");
        assert_eq!(strip_timestamp("2026-01-15T10:30:00Z"), "");
        assert_eq!(
            strip_timestamp("2026-01-15 10:30:00Z x"),
            "2026-01-15 10:30:00Z x"
        );
        assert_eq!(
            strip_timestamp("2026-01-15T10:30:00+01:00 x"),
            "2026-01-15T10:30:00+01:00 x"
        );
        assert_eq!(strip_timestamp("plain"), "plain");
        assert_eq!(strip_timestamp("é"), "é");
    }

    #[test]
    fn escapes_and_controls_are_removed() {
        assert_eq!(strip_ansi("\u{1b}[0;32mRun\u{1b}[0m"), "Run");
        assert_eq!(strip_ansi("\u{1b}]0;CI Build\u{1b}\\"), "");
        assert_eq!(strip_ansi("\u{1b}]0;title\u{7}after"), "after");
        assert_eq!(strip_ansi("a\tb\r"), "a\tb");
        assert_eq!(strip_ansi("\u{1b}(Bx"), "x");
    }

    #[test]
    fn the_tail_keeps_the_last_lines_and_zero_is_off() {
        let log = b"2026-01-15T10:30:00Z one\n\n2026-01-15T10:30:01Z \x1b[31mtwo\x1b[0m\r\nthree\n";
        assert_eq!(tail(log, 2), "two\nthree");
        assert_eq!(tail(log, 10), "one\ntwo\nthree");
        assert_eq!(tail(log, 0), "");
    }

    #[test]
    fn the_recorded_job_log() {
        let log = include_bytes!("../../tests/fixtures/github/job_log_sample.txt");
        let t = tail(log, 5);
        assert_eq!(
            t,
            "--- PASS: TestExtra15 (0.00s)\nFAIL\tgithub.com/owner/repo/pkg\t0.150s\nFAIL: TestFoo\nExit code: 1\nProcess completed with exit code 1."
        );
        let all = tail(log, 10_000);
        assert!(
            all.starts_with("Run actions/checkout@v4\n"),
            "{}",
            &all[..60]
        );
        assert!(
            !all.contains('\u{1b}') && !all.contains("2026-01-15T"),
            "{all}"
        );
        assert!(!all.contains("CI Build"));
    }

    #[test]
    fn only_the_last_mebibyte_is_read() {
        let mut log = b"first line that is cut away\n".to_vec();
        log.extend(std::iter::repeat_n(b'x', MAX_LOG_BYTES));
        log.extend_from_slice(b"\nlast\n");
        let t = tail(&log, 5);
        assert!(!t.contains("first"), "{}", &t[..40]);
        assert!(
            t.ends_with("\nlast") || t == "last",
            "{}",
            &t[t.len() - 10..]
        );
    }
}
