use std::io::Result as IoResult;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::connection::Connection;
#[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
use crate::ssl::SslStream;

pub(crate) enum Stream {
    Http(Connection),
    #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
    Https(SslStream),
}

impl Clone for Stream {
    fn clone(&self) -> Self {
        match self {
            Stream::Http(tcp_stream) => Stream::Http(tcp_stream.try_clone().unwrap()),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => Stream::Https(ssl_stream.clone()),
        }
    }
}

impl From<Connection> for Stream {
    fn from(tcp_stream: Connection) -> Self {
        Stream::Http(tcp_stream)
    }
}

impl Stream {
    fn secure(&self) -> bool {
        match self {
            Stream::Http(_) => false,
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(_) => true,
        }
    }

    fn peer_addr(&mut self) -> IoResult<Option<SocketAddr>> {
        match self {
            Stream::Http(tcp_stream) => tcp_stream.peer_addr(),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.peer_addr(),
        }
    }

    fn shutdown(&mut self, how: Shutdown) -> IoResult<()> {
        match self {
            Stream::Http(tcp_stream) => tcp_stream.shutdown(how),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.shutdown(how),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> IoResult<usize> {
        match self {
            Stream::Http(tcp_stream) => tcp_stream.read(buf),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> IoResult<usize> {
        match self {
            Stream::Http(tcp_stream) => tcp_stream.write(buf),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.write(buf),
        }
    }

    // sortie patch: a head and its body go out in one system call.
    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> IoResult<usize> {
        match self {
            Stream::Http(tcp_stream) => tcp_stream.write_vectored(bufs),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> IoResult<()> {
        match self {
            Stream::Http(tcp_stream) => tcp_stream.flush(),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(ssl_stream) => ssl_stream.flush(),
        }
    }
}

pub struct RefinedTcpStream {
    stream: Stream,
    close_read: bool,
    close_write: bool,
    /// sortie patch: the read deadline, shared with the `ClientConnection` that sets it.
    deadline: Option<Arc<ReadDeadline>>,
    /// The `SO_RCVTIMEO` last set by this stream, to skip redundant system calls.
    applied_timeout: Option<Duration>,
}

/// sortie patch: when reads of a connection must end. `Arm(d)` becomes `At(now + d)` at the
/// first socket read, so time spent waiting for the previous request's handler does not count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlineState {
    Off,
    Arm(Duration),
    At(Instant),
}

#[derive(Debug)]
pub struct ReadDeadline {
    state: Mutex<DeadlineState>,
}

impl ReadDeadline {
    pub fn new() -> Arc<ReadDeadline> {
        Arc::new(ReadDeadline {
            state: Mutex::new(DeadlineState::Off),
        })
    }

    pub fn set(&self, s: DeadlineState) {
        if let Ok(mut g) = self.state.lock() {
            *g = s;
        }
    }

    /// The timeout the next read may block for: `Ok(None)` without deadline, `Err` when it
    /// has passed.
    fn next_timeout(&self) -> IoResult<Option<Duration>> {
        let mut g = match self.state.lock() {
            Ok(g) => g,
            Err(_) => return Ok(None),
        };
        let at = match *g {
            DeadlineState::Off => return Ok(None),
            DeadlineState::Arm(d) => {
                let at = Instant::now() + d;
                *g = DeadlineState::At(at);
                at
            }
            DeadlineState::At(at) => at,
        };
        let left = at.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(1) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "read deadline passed",
            ));
        }
        Ok(Some(left))
    }
}

impl RefinedTcpStream {
    pub(crate) fn new<S>(stream: S) -> (RefinedTcpStream, RefinedTcpStream)
    where
        S: Into<Stream>,
    {
        let stream: Stream = stream.into();

        let (read, write) = (stream.clone(), stream);

        let read = RefinedTcpStream {
            stream: read,
            close_read: true,
            close_write: false,
            deadline: None,
            applied_timeout: None,
        };

        let write = RefinedTcpStream {
            stream: write,
            close_read: false,
            close_write: true,
            deadline: None,
            applied_timeout: None,
        };

        (read, write)
    }

    /// Returns true if this struct wraps around a secure connection.
    #[inline]
    pub(crate) fn secure(&self) -> bool {
        self.stream.secure()
    }

    pub(crate) fn peer_addr(&mut self) -> IoResult<Option<SocketAddr>> {
        self.stream.peer_addr()
    }

    /// sortie patch: the plain TCP socket (`None` over TLS or a Unix socket).
    pub(crate) fn tcp(&self) -> Option<&std::net::TcpStream> {
        match &self.stream {
            Stream::Http(c) => c.tcp(),
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(_) => None,
        }
    }

    /// sortie patch: reads of this stream obey `deadline`.
    pub(crate) fn set_deadline(&mut self, deadline: Arc<ReadDeadline>) {
        self.deadline = Some(deadline);
    }

    fn apply_timeout(&mut self, t: Option<Duration>) -> IoResult<()> {
        if close_enough(self.applied_timeout, t) {
            return Ok(());
        }
        match &self.stream {
            Stream::Http(c) => c.set_read_timeout(t)?,
            #[cfg(any(feature = "ssl-openssl", feature = "ssl-rustls"))]
            Stream::Https(_) => {}
        }
        self.applied_timeout = t;
        Ok(())
    }
}

/// How far the socket's timeout may be from the time left before it is set again. A deadline
/// armed afresh for each request head is a few microseconds short of the one before, so an
/// exact comparison set `SO_RCVTIMEO` on nearly every request; within this a read ends at
/// most this much off its deadline.
const TIMEOUT_SLACK: Duration = Duration::from_millis(1);

fn close_enough(applied: Option<Duration>, wanted: Option<Duration>) -> bool {
    match (applied, wanted) {
        (Some(a), Some(w)) => a.abs_diff(w) <= TIMEOUT_SLACK,
        (a, w) => a == w,
    }
}

impl Drop for RefinedTcpStream {
    fn drop(&mut self) {
        if self.close_read {
            self.stream.shutdown(Shutdown::Read).ok();
        }

        if self.close_write {
            self.stream.shutdown(Shutdown::Write).ok();
        }
    }
}

impl Read for RefinedTcpStream {
    fn read(&mut self, buf: &mut [u8]) -> IoResult<usize> {
        let Some(deadline) = self.deadline.clone() else {
            return self.stream.read(buf);
        };
        let t = deadline.next_timeout()?;
        self.apply_timeout(t)?;
        match self.stream.read(buf) {
            // SO_RCVTIMEO expiring reads as EAGAIN.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "read deadline passed",
            )),
            other => other,
        }
    }
}

impl Write for RefinedTcpStream {
    fn write(&mut self, buf: &[u8]) -> IoResult<usize> {
        self.stream.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> IoResult<usize> {
        self.stream.write_vectored(bufs)
    }

    fn flush(&mut self) -> IoResult<()> {
        self.stream.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::close_enough;
    use std::time::Duration;

    #[test]
    fn a_timeout_is_set_again_only_when_it_moved() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        assert!(close_enough(None, None));
        assert!(close_enough(Some(ms(10_000)), Some(ms(10_000) - us(7))));
        assert!(close_enough(Some(ms(10_000) - us(7)), Some(ms(10_000))));
        assert!(!close_enough(Some(ms(10_000)), Some(ms(9_990))));
        assert!(!close_enough(Some(ms(10_000)), None));
        assert!(!close_enough(None, Some(ms(10_000))));
    }
}
