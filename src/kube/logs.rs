//! Following a pod's log across dropped connections with no line lost or repeated: the stream
//! is read with `timestamps=true`; after a drop it is asked again with `sinceTime` (whole
//! seconds, so it starts at or before the last line seen) and every line up to the last one
//! already passed on (same timestamp, counted) is skipped.

use std::io::{BufRead, BufReader, Read};

/// The position reached in a log: the last line's timestamp and how many lines carried it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogCursor {
    last: Option<jiff::Timestamp>,
    at_last: u64,
    /// Lines at the current timestamp skipped since the stream restarted.
    skipped_at_last: u64,
}

/// A line as the follower sees it.
#[derive(Debug, PartialEq)]
pub enum Line<'a> {
    /// New: pass it on.
    New(&'a [u8]),
    /// Already passed on before the connection dropped.
    Seen,
}

impl LogCursor {
    /// The `sinceTime` to resume from; `None` before any line.
    pub fn since_time(&self) -> Option<String> {
        self.last.map(|t| {
            jiff::Timestamp::from_second(t.as_second())
                .unwrap_or(t)
                .to_string()
        })
    }

    /// Called when a stream (re)starts.
    pub fn restart(&mut self) {
        self.skipped_at_last = 0;
    }

    /// Sorts one `<timestamp> <text>` line; a line without a readable timestamp is new.
    pub fn admit<'a>(&mut self, raw: &'a [u8]) -> Line<'a> {
        let (ts, text) = split_timestamp(raw);
        let Some(ts) = ts else {
            return Line::New(text);
        };
        match self.last {
            Some(last) if ts < last => Line::Seen,
            Some(last) if ts == last && self.skipped_at_last < self.at_last => {
                self.skipped_at_last += 1;
                Line::Seen
            }
            Some(last) if ts == last => {
                self.at_last += 1;
                self.skipped_at_last = self.at_last;
                Line::New(text)
            }
            _ => {
                self.last = Some(ts);
                self.at_last = 1;
                self.skipped_at_last = 1;
                Line::New(text)
            }
        }
    }
}

fn split_timestamp(raw: &[u8]) -> (Option<jiff::Timestamp>, &[u8]) {
    let Some(space) = raw.iter().position(|b| *b == b' ') else {
        return (None, raw);
    };
    let ts = std::str::from_utf8(&raw[..space])
        .ok()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok());
    match ts {
        Some(t) => (Some(t), &raw[space + 1..]),
        None => (None, raw),
    }
}

/// How a read of one line ended.
#[derive(Debug, PartialEq)]
pub enum ReadLine {
    Line(Vec<u8>),
    /// The stream ended (or dropped) with no partial line pending.
    End,
    /// A line longer than the cap: the rest is unread.
    TooLong,
}

/// Reads lines of at most `cap` bytes, checking the cap before buffering more.
pub struct LineReader<R> {
    inner: BufReader<R>,
    cap: usize,
}

impl<R: Read> LineReader<R> {
    pub fn new(r: R, cap: usize) -> LineReader<R> {
        LineReader {
            inner: BufReader::with_capacity(64 << 10, r),
            cap,
        }
    }

    /// The next line without its newline; a read error counts as the end (the follower then
    /// asks again). A last line with no newline is dropped with the connection: it is read
    /// whole after the resume.
    pub fn next_line(&mut self) -> ReadLine {
        let mut line = Vec::new();
        loop {
            let buf = match self.inner.fill_buf() {
                Ok([]) | Err(_) => return ReadLine::End,
                Ok(b) => b,
            };
            let (take, done) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if line.len() + take > self.cap + 1 {
                return ReadLine::TooLong;
            }
            line.extend_from_slice(&buf[..take]);
            self.inner.consume(take);
            if done {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return ReadLine::Line(line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_stream_skips_what_was_passed_on() {
        let mut c = LogCursor::default();
        c.restart();
        let first = [
            "2026-01-01T00:00:01.5Z a",
            "2026-01-01T00:00:02.25Z b",
            "2026-01-01T00:00:02.25Z c",
        ];
        for l in first {
            assert!(matches!(c.admit(l.as_bytes()), Line::New(_)));
        }
        assert_eq!(c.since_time().as_deref(), Some("2026-01-01T00:00:02Z"));
        c.restart();
        assert_eq!(c.admit(b"2026-01-01T00:00:01.5Z a"), Line::Seen);
        assert_eq!(c.admit(b"2026-01-01T00:00:02.25Z b"), Line::Seen);
        assert_eq!(c.admit(b"2026-01-01T00:00:02.25Z c"), Line::Seen);
        assert_eq!(
            c.admit(b"2026-01-01T00:00:02.25Z d"),
            Line::New(b"d".as_slice())
        );
        assert_eq!(
            c.admit(b"2026-01-01T00:00:03.000000001Z e"),
            Line::New(b"e".as_slice())
        );
    }

    #[test]
    fn lines_are_capped_before_they_are_buffered() {
        let data = b"short\nmuch longer line\nend".to_vec();
        let mut r = LineReader::new(&data[..], 8);
        assert_eq!(r.next_line(), ReadLine::Line(b"short".to_vec()));
        assert_eq!(r.next_line(), ReadLine::TooLong);
        let mut r = LineReader::new(&b"tail-without-newline"[..], 100);
        assert_eq!(r.next_line(), ReadLine::End);
    }
}
