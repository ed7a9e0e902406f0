//! sortie patch: the buffered writer of a connection's socket. `std::io::BufWriter` hands a
//! vectored write to its inner writer only when that writer says it supports them
//! (`Write::is_write_vectored`, which cannot be overridden on stable Rust), so over a
//! `RefinedTcpStream` it wrote a head and its body as two system calls. This writer keeps
//! the buffer for small writes and sends any vectored write at least a buffer long straight
//! to the socket, after what the buffer holds.

use std::io::{BufWriter, IoSlice, Result as IoResult, Write};

pub struct SocketWriter<W: Write> {
    inner: BufWriter<W>,
}

impl<W: Write> SocketWriter<W> {
    pub fn with_capacity(capacity: usize, inner: W) -> SocketWriter<W> {
        SocketWriter {
            inner: BufWriter::with_capacity(capacity, inner),
        }
    }

    pub fn get_ref(&self) -> &W {
        self.inner.get_ref()
    }
}

impl<W: Write> Write for SocketWriter<W> {
    fn write(&mut self, buf: &[u8]) -> IoResult<usize> {
        self.inner.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> IoResult<usize> {
        let total = bufs
            .iter()
            .map(|b| b.len())
            .fold(0usize, usize::saturating_add);
        if total < self.inner.capacity() {
            return self.inner.write_vectored(bufs);
        }
        self.inner.flush()?;
        self.inner.get_mut().write_vectored(bufs)
    }

    fn flush(&mut self) -> IoResult<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::SocketWriter;
    use std::io::{IoSlice, Result as IoResult, Write};

    /// Records each call it gets: a write is one call, a vectored write one call whatever
    /// its slices.
    #[derive(Default)]
    struct Calls(Vec<Vec<u8>>);

    impl Write for Calls {
        fn write(&mut self, buf: &[u8]) -> IoResult<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> IoResult<usize> {
            self.0
                .push(bufs.iter().flat_map(|b| b.iter().copied()).collect());
            Ok(bufs.iter().map(|b| b.len()).sum())
        }
        fn flush(&mut self) -> IoResult<()> {
            Ok(())
        }
    }

    #[test]
    fn a_head_and_a_large_body_reach_the_socket_in_one_call() {
        let mut w = SocketWriter::with_capacity(1024, Calls::default());
        let (head, body) = (b"HTTP/1.1 200 OK\r\n\r\n".as_slice(), [7u8; 4096]);
        let n = w.write_vectored(&[IoSlice::new(head), IoSlice::new(&body)]);
        assert_eq!(n.ok(), Some(head.len() + body.len()));
        assert_eq!(w.get_ref().0.len(), 1);
        assert_eq!(w.get_ref().0[0].len(), head.len() + body.len());
    }

    #[test]
    fn buffered_bytes_go_first_and_small_writes_stay_buffered() {
        let mut w = SocketWriter::with_capacity(1024, Calls::default());
        assert!(w.write_all(b"early").is_ok());
        let n = w.write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")]);
        assert_eq!(n.ok(), Some(4));
        assert!(w.get_ref().0.is_empty());
        let big = [1u8; 2048];
        assert_eq!(w.write_vectored(&[IoSlice::new(&big)]).ok(), Some(2048));
        let calls = &w.get_ref().0;
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0], b"earlyabcd");
        assert_eq!(calls[1].len(), 2048);
    }
}
