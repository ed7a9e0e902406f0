//! Captures a child's stdout and stderr merged into one pipe (so lines interleave as the child
//! wrote them), keeping only `cap` bytes (the last ones, or the first ones with [`Keep::Head`])
//! while draining everything, so a chatty child never blocks on a full pipe.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, bounded};

/// What was captured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Captured {
    /// The last bytes written (at most the cap).
    pub bytes: Vec<u8>,
    /// Bytes the child wrote in total.
    pub total_bytes: u64,
    /// True when earlier bytes were dropped to respect the cap.
    pub truncated: bool,
    /// False when the pipe was still open at the end of the grace period (a background
    /// process kept it); the capture is then a snapshot.
    pub complete: bool,
}

/// Which bytes a capture keeps once the child wrote more than its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Keep {
    /// The last bytes (a failing command's message is at its end).
    #[default]
    Tail,
    /// The first bytes (a document read from the start, such as a diff).
    Head,
}

#[derive(Debug, Default)]
struct TailBuffer {
    buf: VecDeque<u8>,
    cap: usize,
    total: u64,
    truncated: bool,
    keep: Keep,
}

impl TailBuffer {
    fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        if self.keep == Keep::Head {
            let room = self.cap.saturating_sub(self.buf.len());
            self.buf.extend(&data[..room.min(data.len())]);
            self.truncated |= data.len() > room;
            return;
        }
        self.buf.extend(data);
        if self.buf.len() > self.cap {
            let excess = self.buf.len() - self.cap;
            self.buf.drain(..excess);
            self.truncated = true;
        }
    }
}

/// A running capture; finish it after the child exits.
#[derive(Debug)]
pub struct MergedOutput {
    shared: Arc<Mutex<TailBuffer>>,
    done: Receiver<()>,
}

/// Points `cmd`'s stdout and stderr at one new pipe and starts draining it on a thread. The
/// caller must drop `cmd` after spawning (see `spawn_in_new_group`), or EOF never arrives.
pub fn attach_merged_output(cmd: &mut Command, cap: usize) -> io::Result<MergedOutput> {
    attach_merged_output_keeping(cmd, cap, Keep::Tail)
}

/// [`attach_merged_output`] keeping the bytes `keep` names.
pub fn attach_merged_output_keeping(
    cmd: &mut Command,
    cap: usize,
    keep: Keep,
) -> io::Result<MergedOutput> {
    let (mut reader, writer) = io::pipe()?;
    cmd.stdout(writer.try_clone()?);
    cmd.stderr(writer);
    let shared = Arc::new(Mutex::new(TailBuffer {
        cap,
        keep,
        ..TailBuffer::default()
    }));
    let (tx, rx) = bounded(1);
    let sink = Arc::clone(&shared);
    thread::Builder::new()
        .name("output-capture".to_string())
        .spawn(move || {
            let mut chunk = [0u8; 8192];
            loop {
                match reader.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => sink
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = tx.send(());
        })?;
    Ok(MergedOutput { shared, done: rx })
}

impl MergedOutput {
    /// Waits up to `grace` for the pipe to reach EOF, then returns what was captured. A
    /// background process that inherited the pipe can keep it open forever; after `grace` the
    /// draining thread is left to finish on its own.
    pub fn finish(self, grace: Duration) -> Captured {
        let complete = self.done.recv_timeout(grace).is_ok();
        let tail = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        Captured {
            bytes: tail.buf.iter().copied().collect(),
            total_bytes: tail.total,
            truncated: tail.truncated,
            complete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_buffer_keeps_last_bytes() {
        let mut t = TailBuffer {
            cap: 4,
            ..TailBuffer::default()
        };
        t.push(b"abc");
        t.push(b"defg");
        assert_eq!(t.buf.iter().copied().collect::<Vec<u8>>(), b"defg");
        assert_eq!(t.total, 7);
        assert!(t.truncated);
    }

    #[test]
    fn head_buffer_keeps_first_bytes() {
        let mut t = TailBuffer {
            cap: 4,
            keep: Keep::Head,
            ..TailBuffer::default()
        };
        t.push(b"abc");
        assert!(!t.truncated);
        t.push(b"defg");
        assert_eq!(t.buf.iter().copied().collect::<Vec<u8>>(), b"abcd");
        assert_eq!(t.total, 7);
        assert!(t.truncated);
    }
}
