//! Many clients opening keep-alive connections at the same moment must all be served while
//! earlier keep-alive connections stay open and idle. (The connection-pool race fixed in
//! vendor/tiny_http needs a browser's timing to show; tests/browser_dashboard.rs catches it.)

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::Project;

#[test]
fn simultaneous_keep_alive_connections_are_all_served() {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow("", "");
    let _d = p.start();
    for round in 0..5 {
        // Open the connections first, then send on all of them at once, keeping them open.
        let port = p.port();
        let handles: Vec<_> = (0..24)
            .map(|_| std::thread::spawn(move || TcpStream::connect(("127.0.0.1", port))))
            .collect();
        let mut conns: Vec<TcpStream> = handles
            .into_iter()
            .map(|h| h.join().expect("join").expect("connect"))
            .collect();
        for c in &mut conns {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            c.write_all(b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .unwrap();
        }
        let started = Instant::now();
        for (i, c) in conns.iter_mut().enumerate() {
            let mut buf = [0u8; 512];
            let n = c
                .read(&mut buf)
                .unwrap_or_else(|e| panic!("round {round} connection {i} not served: {e}"));
            assert!(
                String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
                "round {round} connection {i}"
            );
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        // Keep them open (idle keep-alive) while the next round connects.
        std::mem::forget(conns);
    }
}
