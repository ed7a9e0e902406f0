//! Reading an agent's stdout and stderr on one thread: `poll(2)` over both pipes, stdout split
//! into capped lines for the supervisor, stderr into short lines for the bounded tail. One
//! thread instead of one per pipe, since each only moves bytes along.

use std::io::Read;
use std::os::fd::AsFd;

use rustix::event::{PollFd, PollFlags, poll};

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
}

/// Reads both pipes until each has ended (or its sink closed it), calling the sinks in the
/// order data arrives.
pub(crate) fn read_both<A, B>(a: A, sink_a: &mut dyn PipeSink, b: B, sink_b: &mut dyn PipeSink)
where
    A: Read + AsFd,
    B: Read + AsFd,
{
    let mut a = Some(a);
    let mut b = Some(b);
    let mut buf = vec![0u8; 64 << 10];
    while a.is_some() || b.is_some() {
        let (ready_a, ready_b) = match wait_readable(a.as_ref(), b.as_ref()) {
            Ok(r) => r,
            Err(e) => {
                // poll itself failed: nothing more can be read from either pipe.
                if a.take().is_some() {
                    sink_a.end(Some(std::io::Error::from(e)));
                }
                if b.take().is_some() {
                    sink_b.end(Some(std::io::Error::from(e)));
                }
                return;
            }
        };
        if ready_a {
            read_once(&mut a, sink_a, &mut buf);
        }
        if ready_b {
            read_once(&mut b, sink_b, &mut buf);
        }
    }
}

/// Blocks until one of the open pipes is readable (or hung up); says which.
fn wait_readable<A: AsFd, B: AsFd>(
    a: Option<&A>,
    b: Option<&B>,
) -> Result<(bool, bool), rustix::io::Errno> {
    loop {
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(2);
        if let Some(a) = a {
            fds.push(PollFd::new(a, PollFlags::IN));
        }
        if let Some(b) = b {
            fds.push(PollFd::new(b, PollFlags::IN));
        }
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
        let mut ready = fds.iter().map(|f| !f.revents().is_empty());
        let ready_a = a.is_some() && ready.next().unwrap_or(false);
        let ready_b = b.is_some() && ready.next().unwrap_or(false);
        return Ok((ready_a, ready_b));
    }
}

/// One read from a readable pipe; closes it on end of stream, an error or the sink's word.
fn read_once<P: Read>(pipe: &mut Option<P>, sink: &mut dyn PipeSink, buf: &mut [u8]) {
    let Some(p) = pipe.as_mut() else { return };
    match p.read(buf) {
        Ok(0) => {
            *pipe = None;
            sink.end(None);
        }
        Ok(n) => {
            if !sink.data(&buf[..n]) {
                *pipe = None;
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
        Err(e) => {
            *pipe = None;
            sink.end(Some(e));
        }
    }
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

    struct Collect(Vec<u8>, bool);
    impl PipeSink for Collect {
        fn data(&mut self, chunk: &[u8]) -> bool {
            self.0.extend_from_slice(chunk);
            true
        }
        fn end(&mut self, error: Option<std::io::Error>) {
            self.1 = error.is_none();
        }
    }

    #[test]
    fn both_pipes_are_read_to_their_end() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "echo out; echo err >&2; echo out2"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let (mut a, mut b) = (Collect(Vec::new(), false), Collect(Vec::new(), false));
        if let (Some(out), Some(err)) = (out, err) {
            read_both(out, &mut a, err, &mut b);
        }
        let _ = child.wait();
        assert_eq!(a.0, b"out\nout2\n");
        assert_eq!(b.0, b"err\n");
        assert!(a.1 && b.1, "both ended cleanly");
    }
}
