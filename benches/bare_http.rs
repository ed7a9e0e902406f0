//! The floor `scripts/bench-state.sh` measures `/api/v1/state` against: a bare HTTP/1.1 server
//! that answers every request on a keep-alive connection with the same prebuilt bytes (status
//! line, `Content-Length`, the body read from a file) in one `write_all`, one thread per
//! connection. No routing, no headers parsed beyond the blank line that ends a head: what is
//! left is the kernel's cost of moving the bytes. Not part of the test suite.
//!
//!   cargo bench --bench bare_http -- <port> <body-file> [gzip]
//!
//! `BARE_SEND_BUFFER=<bytes>` gives its sockets a fixed send buffer, as sortie's have (128 KiB),
//! instead of the kernel's autotuned one.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let (Some(port), Some(file)) = (args.first(), args.get(1)) else {
        eprintln!("usage: bare_http <port> <body-file> [gzip]");
        std::process::exit(2);
    };
    let body = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("bare_http: cannot read {file}: {e}");
            std::process::exit(2);
        }
    };
    let encoding = if args.get(2).is_some_and(|a| a == "gzip") {
        "Content-Encoding: gzip\r\n"
    } else {
        ""
    };
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{encoding}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    let answer = Arc::new(answer);
    let listener = match TcpListener::bind(("127.0.0.1", port.parse::<u16>().unwrap_or(0))) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bare_http: cannot listen on {port}: {e}");
            std::process::exit(2);
        }
    };
    let send_buffer = std::env::var("BARE_SEND_BUFFER").ok();
    if let Some(size) = send_buffer.and_then(|v| v.parse().ok())
        && let Err(e) = rustix::net::sockopt::set_socket_send_buffer_size(&listener, size)
    {
        eprintln!("bare_http: send buffer: {e}");
    }
    for stream in listener.incoming().flatten() {
        let answer = Arc::clone(&answer);
        std::thread::spawn(move || serve(stream, &answer));
    }
}

/// Answers each request head on the connection until the client closes it.
fn serve(stream: TcpStream, answer: &[u8]) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" || line == "\n" => {
                if out.write_all(answer).is_err() {
                    return;
                }
            }
            Ok(_) => {}
        }
    }
}
