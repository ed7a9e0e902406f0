//! What an agent's pipe is read into: stdout split into capped lines for the supervisor,
//! stderr into short lines for the bounded tail. The reading itself is `agent::pipe_hub`'s,
//! one thread for every agent's pipes.

/// Splits a byte stream into lines without their `\n` (and a trailing `\r`), refusing a line
/// longer than `max` bytes.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    line: Vec<u8>,
    max: usize,
}

/// A line longer than the cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineTooLong(pub usize);

impl std::fmt::Display for LineTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line exceeds the {}-byte limit", self.0)
    }
}

impl LineSplitter {
    pub(crate) fn new(max: usize) -> LineSplitter {
        LineSplitter {
            line: Vec::new(),
            max,
        }
    }

    /// Feeds one chunk; `emit` gets each complete line and returns false to stop early.
    /// Returns whether to go on.
    pub(crate) fn feed(
        &mut self,
        mut chunk: &[u8],
        emit: &mut dyn FnMut(Vec<u8>) -> bool,
    ) -> Result<bool, LineTooLong> {
        while !chunk.is_empty() {
            let (part, rest, complete) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &chunk[chunk.len()..], false),
            };
            if self.line.len() + part.len() > self.max {
                return Err(LineTooLong(self.max));
            }
            self.line.extend_from_slice(part);
            chunk = rest;
            if complete {
                if self.line.last() == Some(&b'\r') {
                    self.line.pop();
                }
                if !emit(std::mem::take(&mut self.line)) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// The unterminated rest at end of stream, if any.
    pub(crate) fn finish(&mut self) -> Option<Vec<u8>> {
        (!self.line.is_empty()).then(|| std::mem::take(&mut self.line))
    }
}

/// What one pipe does with what it reads.
pub(crate) trait PipeSink {
    /// A chunk was read; false closes this pipe (the reader is done with it).
    fn data(&mut self, chunk: &[u8]) -> bool;
    /// End of stream or a read error (`Some`).
    fn end(&mut self, error: Option<std::io::Error>);
    /// Passes on what `data` and `end` produced, as far as the consumer takes it now.
    fn flush(&mut self) -> Flush {
        Flush::Clear
    }
}

/// Whether a sink passed everything on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flush {
    /// Nothing held.
    Clear,
    /// The consumer is full: lines are held, read nothing more until they are taken.
    Held,
    /// The consumer is gone: nothing more is wanted from this pipe.
    Gone,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_joins_chunks_and_caps_lines() {
        let mut s = LineSplitter::new(8);
        let mut got = Vec::new();
        let mut emit = |l: Vec<u8>| {
            got.push(String::from_utf8_lossy(&l).into_owned());
            true
        };
        assert_eq!(s.feed(b"ab", &mut emit), Ok(true));
        assert_eq!(s.feed(b"c\r\nd\n", &mut emit), Ok(true));
        assert_eq!(s.feed(b"ef", &mut emit), Ok(true));
        assert_eq!(s.finish(), Some(b"ef".to_vec()));
        assert_eq!(got, ["abc", "d"]);
        assert_eq!(s.feed(b"123456789", &mut |_| true), Err(LineTooLong(8)));
    }
}
