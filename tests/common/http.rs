//! A tiny blocking HTTP/1.1 client over raw sockets (so tests control every header), and a
//! reader of the server-sent event stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One answered request.
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// One request to 127.0.0.1:`port` with `Connection: close`; `headers` are added as given (a
/// `Host` header is added unless one is given). `None` when nothing answers.
pub fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Option<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        head.push_str("Content-Length: 0\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let h = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = h.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let body = &raw[split + 4..];
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(body).unwrap_or_else(|| body.to_vec())
    } else {
        body.to_vec()
    };
    Some(Resp {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// A GET's body when the answer is 2xx; `None` otherwise or when nothing answers.
pub fn get_ok(port: u16, path: &str) -> Option<String> {
    request(port, "GET", path, &[])
        .filter(Resp::is_success)
        .map(|r| r.body)
}

/// The body of a `Transfer-Encoding: chunked` response (large bodies are sent that way).
fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = raw.windows(2).position(|w| w == b"\r\n")?;
        let size_field = std::str::from_utf8(&raw[..eol]).ok()?;
        let size = usize::from_str_radix(size_field.split(';').next()?.trim(), 16).ok()?;
        raw = &raw[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size + 2..)?;
    }
}

/// One SSE frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub id: String,
    pub event: String,
    pub data: Value,
    pub at: Instant,
}

/// A reader of an open event stream.
pub struct Stream {
    pub reader: BufReader<TcpStream>,
    pub status: u16,
    pub headers: Vec<String>,
}

pub fn open_stream(port: u16, path_and_query: &str, headers: &[(&str, &str)]) -> Stream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("connect: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut head = format!("GET {path_and_query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut w = s.try_clone().unwrap_or_else(|e| panic!("{e}"));
    w.write_all(head.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut reader = BufReader::new(s);
    let mut status_line = String::new();
    reader
        .read_line(&mut status_line)
        .unwrap_or_else(|e| panic!("{e}"));
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
            break;
        }
        headers.push(l.trim().to_string());
    }
    Stream {
        reader,
        status,
        headers,
    }
}

impl Stream {
    /// The next frame, or `None` at end of stream or timeout.
    pub fn next_frame(&mut self, timeout: Duration) -> Option<Frame> {
        self.reader.get_ref().set_read_timeout(Some(timeout)).ok()?;
        let (mut id, mut event, mut data) = (String::new(), String::new(), String::new());
        loop {
            let mut l = String::new();
            let n = self.reader.read_line(&mut l).ok()?;
            if n == 0 {
                return None;
            }
            let l = l.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                if event.is_empty() && data.is_empty() {
                    continue;
                }
                return Some(Frame {
                    id,
                    event,
                    data: serde_json::from_str(&data).unwrap_or(Value::Null),
                    at: Instant::now(),
                });
            }
            if let Some(v) = l.strip_prefix("id: ") {
                id = v.to_string();
            } else if let Some(v) = l.strip_prefix("event: ") {
                event = v.to_string();
            } else if let Some(v) = l.strip_prefix("data: ") {
                data = v.to_string();
            }
        }
    }

    /// Frames until one matches `pred` (returned last) or the deadline passes.
    pub fn until(&mut self, timeout: Duration, pred: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        while Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_frame(left.max(Duration::from_millis(1))) {
                Some(f) => {
                    let done = pred(&f);
                    out.push(f);
                    if done {
                        return out;
                    }
                }
                None => return out,
            }
        }
        out
    }
}

/// Parses one response from the start of `raw` (a `Content-Length` or chunked body, or
/// whatever follows the head). `None` when no complete head is there.
pub fn parse_response(raw: &[u8]) -> Option<Resp> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let h = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = h.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let rest = &raw[split + 4..];
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok());
    let body = match len {
        Some(n) => rest.get(..n)?.to_vec(),
        None => dechunk(rest).unwrap_or_else(|| rest.to_vec()),
    };
    Some(Resp {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Reads from `s` until one complete response has arrived, the server closes, or `timeout`
/// passes; then parses it. `None` when no complete response arrived.
pub fn read_response(s: &mut TcpStream, timeout: Duration) -> Option<Resp> {
    let deadline = Instant::now() + timeout;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(r) = parse_response(&raw) {
            let complete = r
                .header("content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .is_some_and(|n| r.body.len() >= n);
            if complete {
                return Some(r);
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return parse_response(&raw);
        }
        s.set_read_timeout(Some(left)).ok()?;
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return parse_response(&raw),
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
}

/// Sends `raw` as it is on a new connection to 127.0.0.1:`port` and reads one response
/// within `timeout`. `None` when nothing parseable answers.
pub fn raw_exchange(port: u16, raw: &[u8], timeout: Duration) -> Option<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(raw).ok()?;
    read_response(&mut s, timeout)
}

/// A connection to 127.0.0.1:`port` from the loopback address `from` (`[127, 0, 0, 2]`…), so
/// one test can be several clients (Linux routes all of 127.0.0.0/8 to loopback).
pub fn connect_from(from: [u8; 4], port: u16) -> std::io::Result<TcpStream> {
    use rustix::net::{AddressFamily, SocketType, bind, connect, socket};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None)?;
    bind(&fd, &std::net::SocketAddrV4::new(from.into(), 0))?;
    connect(
        &fd,
        &std::net::SocketAddrV4::new([127, 0, 0, 1].into(), port),
    )?;
    Ok(TcpStream::from(fd))
}

/// [`raw_exchange`] from the loopback address `from`.
pub fn raw_exchange_from(from: [u8; 4], port: u16, raw: &[u8], timeout: Duration) -> Option<Resp> {
    let mut s = connect_from(from, port).ok()?;
    s.write_all(raw).ok()?;
    read_response(&mut s, timeout)
}
