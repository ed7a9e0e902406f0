use ascii::AsciiString;

use std::io::Error as IoError;
use std::io::Result as IoResult;
use std::io::{BufReader, ErrorKind, Read};

use std::io::Write;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::limits::{error_response, Admission, ConnRefusal, Head, Limits, Refusal};
use crate::slots::SlotGuard;
use crate::util::refined_tcp_stream::{DeadlineState, ReadDeadline};

use crate::common::{HTTPVersion, Method};
use crate::util::RefinedTcpStream;
use crate::util::{SequentialReader, SequentialReaderBuilder, SequentialWriterBuilder, SocketWriter};
use crate::Request;

/// A ClientConnection is an object that will store a socket to a client
/// and return Request objects.
pub struct ClientConnection {
    // sortie patch: the slot this connection holds while it or a writer it handed out lives;
    // declared first, so it is released before the socket closes (a client that saw the
    // close and connects again finds the slot free)
    active: Option<Arc<SlotGuard>>,

    // address of the client
    remote_addr: IoResult<Option<SocketAddr>>,

    // sequence of Readers to the stream, so that the data is not read in
    //  the wrong order
    source: SequentialReaderBuilder<BufReader<RefinedTcpStream>>,

    // sequence of Writers to the stream, to avoid writing response #2 before
    //  response #1
    sink: SequentialWriterBuilder<SocketWriter<RefinedTcpStream>>,

    // Reader to read the next header from
    next_header_source: SequentialReader<BufReader<RefinedTcpStream>>,

    // set to true if we know that the previous request is the last one
    no_more_requests: bool,

    // true if the connection goes through SSL
    secure: bool,

    // sortie patch: bounds, the read deadline they set, bytes of the current head so far
    limits: Option<Arc<Limits>>,
    deadline: Option<Arc<ReadDeadline>>,
    head_bytes: usize,
    // sortie patch: signalled when the previous request's response writer is dropped or
    // taken over (`Handoff`)
    prev_done: Option<std::sync::mpsc::Receiver<Handoff>>,
    // sortie patch: a connection on a probe slot: one probe request, then closed
    probe_only: bool,
}

/// sortie patch: what became of a request's response writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handoff {
    /// Dropped: the response is sent, or the request abandoned.
    Done,
    /// Taken by `Request::into_writer`: the handler owns the connection's write half from
    /// now on (an event stream), so the connection reads no further request.
    Detached,
}

/// sortie patch: a response writer that signals when it is dropped, so the connection reads
/// its next request only then; it keeps the connection counted as open while it lives.
struct DoneOnDrop<W: Write> {
    // first: released before `inner` closes the write half
    _active: Option<Arc<SlotGuard>>,
    inner: W,
    done: std::sync::mpsc::Sender<Handoff>,
}

impl<W: Write> Write for DoneOnDrop<W> {
    fn write(&mut self, buf: &[u8]) -> IoResult<usize> {
        self.inner.write(buf)
    }
    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> IoResult<usize> {
        self.inner.write_vectored(bufs)
    }
    fn flush(&mut self) -> IoResult<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for DoneOnDrop<W> {
    fn drop(&mut self) {
        let _ = self.done.send(Handoff::Done);
    }
}

/// Error that can happen when reading a request.
#[derive(Debug)]
enum ReadError {
    WrongRequestLine,
    WrongHeader(HTTPVersion),
    /// the client sent an unrecognized `Expect` header
    ExpectationFailed(HTTPVersion),
    ReadIoError(IoError),
    /// sortie patch: a request line or header with bytes outside ASCII
    NotAscii,
    /// sortie patch: a header line longer than the limit, or a head larger than its limit
    LineTooLong,
    /// sortie patch: a request line longer than the limit
    RequestLineTooLong,
    /// sortie patch: a request line naming HTTP/2 or later (an HTTP/2 prior-knowledge
    /// preface among them), which this HTTP/1.1 server cannot answer in its own protocol
    VersionNotSupported,
    /// sortie patch: a body longer than the limit (the limit for its request target)
    BodyTooLarge(usize),
    /// sortie patch: the previous request's handler took the connection over
    Detached,
    /// sortie patch: refused from its head (`Limits::admit`, or not a probe on a probe slot)
    Refused(Refusal),
}

impl ClientConnection {
    /// Creates a new `ClientConnection` that takes ownership of the `TcpStream`.
    pub fn new(
        write_socket: RefinedTcpStream,
        mut read_socket: RefinedTcpStream,
        limits: Option<Arc<Limits>>,
        active: Option<Arc<SlotGuard>>,
        probe_only: bool,
    ) -> ClientConnection {
        let remote_addr = read_socket.peer_addr();
        let secure = read_socket.secure();
        let deadline = limits.as_ref().map(|_| {
            let d = ReadDeadline::new();
            read_socket.set_deadline(d.clone());
            d
        });

        let mut source = SequentialReaderBuilder::new(BufReader::with_capacity(1024, read_socket));
        let first_header = source.next().unwrap();

        let sink = SequentialWriterBuilder::new(SocketWriter::with_capacity(1024, write_socket));
        ClientConnection {
            source,
            sink,
            remote_addr,
            next_header_source: first_header,
            no_more_requests: false,
            secure,
            limits,
            deadline,
            head_bytes: 0,
            prev_done: None,
            active,
            probe_only,
        }
    }

    fn set_deadline(&self, s: DeadlineState) {
        if let Some(d) = &self.deadline {
            d.set(s);
        }
    }

    /// sortie patch: writes a `Connection: close` error response of the server's own.
    fn send_error(&mut self, status: u16, code: &str, message: &str) {
        self.send_answer(status, code, message, None);
    }

    /// sortie patch: writes `r` as a `Connection: close` response.
    fn send_refusal(&mut self, r: &Refusal) {
        self.send_answer(r.status, r.code, &r.message, r.retry_after);
    }

    fn send_answer(&mut self, status: u16, code: &str, message: &str, retry_after: Option<u64>) {
        let Some(limits) = self.limits.clone() else {
            return;
        };
        if let Some(mut writer) = self.sink.next() {
            let answer = error_response(&limits, status, code, message, retry_after);
            let _ = writer.write_all(&answer);
            let _ = writer.flush();
        }
    }

    /// sortie patch: the answer when no thread could be started for this connection.
    pub(crate) fn refuse_busy(&mut self) {
        if let Some(l) = &self.limits {
            (l.on_refused)(ConnRefusal::NoThread, self.remote_addr.as_ref().ok().copied().flatten());
        }
        self.send_refusal(&ConnRefusal::NoThread.refusal());
    }

    /// sortie patch: before closing a connection whose client may still be sending, reads
    /// and discards for a short while, so the close does not reset the connection (which can
    /// destroy the response before the client reads it).
    fn linger(&mut self) {
        if self.deadline.is_none() {
            return;
        }
        self.set_deadline(DeadlineState::At(Instant::now() + Duration::from_secs(2)));
        let mut buf = [0u8; 8192];
        let mut total = 0usize;
        while total < (1 << 20) {
            match self.next_header_source.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    }

    /// true if the connection is HTTPS
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// Reads the next line from self.next_header_source.
    ///
    /// Reads until `CRLF` is reached. The next read will start
    ///  at the first byte of the new line.
    ///
    /// sortie patch (servers with limits): a bare `LF` ends a line too (RFC 9112, section
    /// 2.2), so a client that sends one is answered instead of waiting for its deadline; a
    /// line longer than `max_line` or a head growing past `max_head` ends the read.
    fn read_next_line(&mut self, max_line: Option<usize>) -> IoResult<AsciiString> {
        let mut buf = Vec::new();
        let mut prev_byte_was_cr = false;
        let max_head = self.limits.as_ref().map(|l| l.max_head);
        let bare_lf = self.limits.is_some();

        loop {
            let byte = self.next_header_source.by_ref().bytes().next();

            let byte = match byte {
                Some(b) => b?,
                None => return Err(IoError::new(ErrorKind::ConnectionAborted, "Unexpected EOF")),
            };
            self.head_bytes += 1;

            if byte == b'\n' && (prev_byte_was_cr || bare_lf) {
                if prev_byte_was_cr {
                    buf.pop(); // removing the '\r'
                }
                return AsciiString::from_ascii(buf)
                    .map_err(|_| IoError::new(ErrorKind::InvalidData, "Header is not in ASCII"));
            }

            prev_byte_was_cr = byte == b'\r';

            buf.push(byte);
            if max_line.is_some_and(|m| buf.len() > m)
                || max_head.is_some_and(|m| self.head_bytes > m)
            {
                return Err(IoError::new(ErrorKind::OutOfMemory, "line too long"));
            }
        }
    }

    /// sortie patch: line errors that get an answer of their own.
    fn line_error(&self, e: IoError) -> ReadError {
        if self.limits.is_some() {
            match e.kind() {
                ErrorKind::InvalidData => return ReadError::NotAscii,
                ErrorKind::OutOfMemory => return ReadError::LineTooLong,
                _ => {}
            }
        }
        ReadError::ReadIoError(e)
    }

    /// Reads a request from the stream.
    /// Blocks until the header has been read.
    fn read(&mut self) -> Result<Request, ReadError> {
        let (method, path, version, headers) = {
            // reading the request line
            self.head_bytes = 0;
            if let Some(l) = &self.limits {
                // One request in flight per connection: a client pipelining requests without
                // reading the answers cannot fill the request queue. A handler that takes
                // the writer over (an event stream) ends the connection's reading; a handler
                // that neither answers nor takes over is waited for up to the head timeout.
                if let Some(done) = self.prev_done.take() {
                    if done.recv_timeout(l.head_timeout) == Ok(Handoff::Detached) {
                        return Err(ReadError::Detached);
                    }
                }
                let t = if self.probe_only {
                    l.probe_head_timeout.min(l.head_timeout)
                } else {
                    l.head_timeout
                };
                self.set_deadline(DeadlineState::Arm(t));
            }
            let (method, path, version) = {
                let max_line = self.limits.as_ref().map(|l| l.max_request_line);
                let line = self
                    .read_next_line(max_line)
                    .map_err(|e| match self.line_error(e) {
                        ReadError::LineTooLong => ReadError::RequestLineTooLong,
                        other => other,
                    })?;
                // sortie patch: control bytes are not allowed anywhere in a request line.
                if self.limits.is_some()
                    && line
                        .as_bytes()
                        .iter()
                        .any(|&b| b < 0x20 || b == 0x7f)
                {
                    return Err(ReadError::WrongRequestLine);
                }

                let parsed = parse_request_line(
                    line.as_str().trim(), // TODO: remove this conversion
                )?;
                // sortie patch: HTTP/2 and later are refused before any header is read.
                if self.limits.is_some() && parsed.2 > HTTPVersion(1, 1) {
                    return Err(ReadError::VersionNotSupported);
                }
                parsed
            };

            // getting all headers
            let headers = {
                let mut headers = Vec::new();
                let max_line = self.limits.as_ref().map(|l| l.max_head_line);
                loop {
                    let line = self
                        .read_next_line(max_line)
                        .map_err(|e| self.line_error(e))?;

                    if line.is_empty() {
                        break;
                    };
                    headers.push(match FromStr::from_str(line.as_str().trim()) {
                        // TODO: remove this conversion
                        Ok(h) => h,
                        _ => return Err(ReadError::WrongHeader(version)),
                    });
                }

                headers
            };

            (method, path, version, headers)
        };

        // sortie patch: what becomes of the body is decided from the head alone, before any
        // byte of it is read
        let (body_cap, hold) = match self.limits.clone() {
            None => (None, None),
            Some(l) => {
                let remote = self.remote_addr.as_ref().ok().copied().flatten();
                if self.probe_only && !(l.is_probe)(&method, &path) {
                    (l.on_refused)(ConnRefusal::NotAProbe, remote);
                    return Err(ReadError::Refused(ConnRefusal::NotAProbe.refusal()));
                }
                let (content_length, chunked) = body_framing(&headers);
                let head = Head {
                    method: &method,
                    target: &path,
                    headers: &headers,
                    remote,
                    content_length,
                    chunked,
                };
                match (l.admit)(&head) {
                    Admission::Read { max_body, hold } => (Some(max_body), hold),
                    Admission::Refuse(r) => return Err(ReadError::Refused(r)),
                }
            }
        };

        // building the writer for the request
        let writer = self.sink.next().unwrap();
        let mut detach_notice = None;
        let writer: Box<dyn Write + Send + 'static> = if let Some(l) = &self.limits {
            let t = l.body_timeout;
            self.set_deadline(DeadlineState::Arm(t));
            let (done, prev_done) = std::sync::mpsc::channel();
            self.prev_done = Some(prev_done);
            detach_notice = Some(done.clone());
            Box::new(DoneOnDrop {
                inner: writer,
                done,
                _active: self.active.clone(),
            })
        } else {
            Box::new(writer)
        };

        // follow-up for next potential request
        let mut data_source = self.source.next().unwrap();
        std::mem::swap(&mut self.next_header_source, &mut data_source);

        // building the next reader
        let request = crate::request::new_request(
            self.secure,
            method,
            path,
            version.clone(),
            headers,
            *self.remote_addr.as_ref().unwrap(),
            data_source,
            writer,
            body_cap,
            hold,
        )
        .map_err(|e| {
            use crate::request;
            match e {
                request::RequestCreationError::CreationIoError(e) => ReadError::ReadIoError(e),
                request::RequestCreationError::ExpectationFailed => {
                    ReadError::ExpectationFailed(version)
                }
                request::RequestCreationError::BodyTooLarge => {
                    ReadError::BodyTooLarge(body_cap.unwrap_or(0))
                }
            }
        })?
        .with_detach_notice(detach_notice)
        .with_send_buffer(crate::send_buffer::SendBuffer::new(self.sink.shared()));
        self.set_deadline(DeadlineState::Off);

        // return the request
        Ok(request)
    }
}

impl Iterator for ClientConnection {
    type Item = Request;

    /// Blocks until the next Request is available.
    /// Returns None when no new Requests will come from the client.
    fn next(&mut self) -> Option<Request> {
        use crate::{Response, StatusCode};

        // the client sent a "connection: close" header in this previous request
        //  or is using HTTP 1.0, meaning that no new request will come
        if self.no_more_requests {
            return None;
        }

        loop {
            let rq = match self.read() {
                Err(ReadError::NotAscii) => {
                    self.send_error(
                        400,
                        "invalid_request",
                        "the request line or a header contains bytes outside ASCII; percent-encode the path",
                    );
                    self.linger();
                    return None;
                }
                Err(ReadError::LineTooLong) => {
                    self.send_error(
                        431,
                        "request_header_too_large",
                        "a header line or the request head is too large",
                    );
                    self.linger();
                    return None;
                }
                Err(ReadError::RequestLineTooLong) => {
                    self.send_error(414, "uri_too_long", "the request line is too long");
                    self.linger();
                    return None;
                }
                Err(ReadError::VersionNotSupported) => {
                    self.send_error(
                        505,
                        "http_version_not_supported",
                        "this server speaks HTTP/1.1 only",
                    );
                    self.linger();
                    return None;
                }
                Err(ReadError::Refused(r)) => {
                    self.send_refusal(&r);
                    self.linger();
                    return None;
                }
                Err(ReadError::BodyTooLarge(max)) => {
                    self.send_error(
                        413,
                        "payload_too_large",
                        &format!("the request body is larger than {max} bytes"),
                    );
                    self.linger();
                    return None;
                }
                Err(ReadError::ReadIoError(ref err))
                    if err.kind() == ErrorKind::TimedOut && self.limits.is_some() =>
                {
                    // Nothing of a next request arrived: an idle keep-alive connection ends
                    // quietly. A request cut short gets a 408.
                    if self.head_bytes > 0 {
                        self.send_error(
                            408,
                            "request_timeout",
                            "the request was not received in time",
                        );
                    }
                    return None;
                }
                Err(ReadError::WrongRequestLine) if self.limits.is_some() => {
                    self.send_error(400, "invalid_request", "malformed request line");
                    return None;
                }
                Err(ReadError::WrongHeader(_)) if self.limits.is_some() => {
                    self.send_error(400, "invalid_request", "malformed header line");
                    return None;
                }
                Err(ReadError::WrongRequestLine) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(400));
                    response
                        .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                        .ok();
                    return None; // we don't know where the next request would start,
                                 // se we have to close
                }

                Err(ReadError::WrongHeader(ver)) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(400));
                    response.raw_print(writer, ver, &[], false, None).ok();
                    return None; // we don't know where the next request would start,
                                 // se we have to close
                }

                Err(ReadError::ReadIoError(ref err)) if err.kind() == ErrorKind::TimedOut => {
                    // request timeout
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(408));
                    response
                        .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                        .ok();
                    return None; // closing the connection
                }

                Err(ReadError::ExpectationFailed(ver)) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(417));
                    response.raw_print(writer, ver, &[], true, None).ok();
                    return None; // TODO: should be recoverable, but needs handling in case of body
                }

                Err(ReadError::ReadIoError(_)) | Err(ReadError::Detached) => return None,

                Ok(rq) => rq,
            };

            // checking HTTP version
            if *rq.http_version() > (1, 1) {
                let writer = self.sink.next().unwrap();
                let response = Response::from_string(
                    "This server only supports HTTP versions 1.0 and 1.1".to_owned(),
                )
                .with_status_code(StatusCode(505));
                response
                    .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                    .ok();
                continue;
            }

            // updating the status of the connection
            let connection_header = rq
                .headers()
                .iter()
                .find(|h| h.field.equiv("Connection"))
                .map(|h| h.value.as_str());

            let lowercase = connection_header.map(|h| h.to_ascii_lowercase());

            match lowercase {
                Some(ref val) if val.contains("close") => self.no_more_requests = true,
                Some(ref val) if val.contains("upgrade") => self.no_more_requests = true,
                Some(ref val)
                    if !val.contains("keep-alive") && *rq.http_version() == HTTPVersion(1, 0) =>
                {
                    self.no_more_requests = true
                }
                None if *rq.http_version() == HTTPVersion(1, 0) => self.no_more_requests = true,
                _ => (),
            };

            // sortie patch: a probe slot serves one request
            if self.probe_only {
                self.no_more_requests = true;
            }

            // returning the request
            return Some(rq);
        }
    }
}

/// sortie patch: the body's framing as `new_request` reads it: the announced length (none
/// when chunked: `Transfer-Encoding` wins over `Content-Length`), and whether it is chunked.
fn body_framing(headers: &[crate::Header]) -> (Option<usize>, bool) {
    if headers.iter().any(|h| h.field.equiv("Transfer-Encoding")) {
        return (None, true);
    }
    let len = headers
        .iter()
        .find(|h| h.field.equiv("Content-Length"))
        .and_then(|h| FromStr::from_str(h.value.as_str()).ok());
    (len, false)
}

/// Parses a "HTTP/1.1" string.
fn parse_http_version(version: &str) -> Result<HTTPVersion, ReadError> {
    let (major, minor) = match version {
        "HTTP/0.9" => (0, 9),
        "HTTP/1.0" => (1, 0),
        "HTTP/1.1" => (1, 1),
        "HTTP/2.0" => (2, 0),
        "HTTP/3.0" => (3, 0),
        _ => return Err(ReadError::WrongRequestLine),
    };

    Ok(HTTPVersion(major, minor))
}

/// Parses the request line of the request.
/// eg. GET / HTTP/1.1
fn parse_request_line(line: &str) -> Result<(Method, String, HTTPVersion), ReadError> {
    let mut parts = line.split(' ');

    let method = parts.next().and_then(|w| w.parse().ok());
    let path = parts.next().map(ToOwned::to_owned);
    let version = parts.next().and_then(|w| parse_http_version(w).ok());

    method
        .and_then(|method| Some((method, path?, version?)))
        .ok_or(ReadError::WrongRequestLine)
}

#[cfg(test)]
mod test {
    #[test]
    fn test_parse_request_line() {
        let (method, path, ver) = super::parse_request_line("GET /hello HTTP/1.1").unwrap();

        assert!(method == crate::Method::Get);
        assert!(path == "/hello");
        assert!(ver == crate::common::HTTPVersion(1, 1));

        assert!(super::parse_request_line("GET /hello").is_err());
        assert!(super::parse_request_line("qsd qsd qsd").is_err());
    }
}
