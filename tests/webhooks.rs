//! `POST /api/v1/webhooks/{kind}` through the real binary (file tracker, mock agent, a poll
//! interval of ten minutes): a signed delivery makes the next poll, and so the dispatch, happen
//! at once; a delivery that is not verified is refused and logged without effect. The GitHub
//! bodies are GitHub's own payload examples (tests/fixtures/github-webhooks/NOTICE).

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{
    Daemon, Resp, Setup, connect_from, issues, mock_workflow, raw_exchange, raw_exchange_from,
    read_response,
};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const GITHUB_SECRET: &str = "gh-webhook-secret-7f3a9c";
const ANSWER: Duration = Duration::from_secs(30);

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/github-webhooks/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|e| panic!("hmac key: {e}"));
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bytes of one delivery (`Connection: close` unless `keep_alive`).
fn delivery_bytes(
    port: u16,
    kind: &str,
    headers: &[(&str, String)],
    body: &[u8],
    keep_alive: bool,
) -> Vec<u8> {
    let mut raw = format!(
        "POST /api/v1/webhooks/{kind} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !keep_alive {
        raw.push_str("Connection: close\r\n");
    }
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str("\r\n");
    let mut bytes = raw.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn deliver(d: &Daemon, kind: &str, headers: &[(&str, String)], body: &[u8]) -> Resp {
    deliver_from([127, 0, 0, 1], d, kind, headers, body)
}

/// A delivery from the loopback address `from` (another client than 127.0.0.1).
fn deliver_from(
    from: [u8; 4],
    d: &Daemon,
    kind: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Resp {
    let bytes = delivery_bytes(d.port, kind, headers, body, false);
    raw_exchange_from(from, d.port, &bytes, ANSWER)
        .unwrap_or_else(|| panic!("no answer to the {kind} delivery"))
}

fn github(d: &Daemon, secret: &str, delivery: &str, body: &[u8]) -> Resp {
    deliver(d, "github", &github_headers(secret, delivery, body), body)
}

/// `sortie_poll_cycles_total{result="success"}` from `/metrics`.
fn polls(d: &Daemon) -> f64 {
    let text = d
        .get_ok("/metrics")
        .unwrap_or_else(|| panic!("no /metrics"));
    text.lines()
        .find_map(|l| l.strip_prefix("sortie_poll_cycles_total{result=\"success\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no poll counter in\n{text}"))
}

fn metric(d: &Daemon, series: &str) -> f64 {
    let text = d.get_ok("/metrics").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{series} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

fn slow_poll_workflow() -> String {
    mock_workflow("", "  turn_delay_ms: 600000\n")
        .replace("interval_ms: 60000", "interval_ms: 600000")
}

fn assert_error(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], code, "{}", r.body);
}

#[test]
fn a_signed_github_delivery_dispatches_at_once_and_a_bad_signature_has_no_effect() {
    let s = Setup::new(&slow_poll_workflow(), "[]");
    let d = s.start(&[("SORTIE_WEBHOOK_SECRET_GITHUB", GITHUB_SECRET)]);
    d.wait_until("the first poll", ANSWER, || polls(&d) >= 1.0);
    let before = polls(&d);
    // A new active issue the next poll would find; the next timed poll is ten minutes away.
    std::fs::write(
        s.path().join("issues.json"),
        issues(&[("1", "T-1", "To Do")]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let body = fixture("issues-opened.json");

    let bad = github(
        &d,
        "not-the-secret",
        "0b1c7e20-aaaa-11ee-8c90-0242ac120002",
        &body,
    );
    assert_error(&bad, 401, "webhook_unverified");
    d.wait_until("the refusal is logged", ANSWER, || {
        d.log_text()
            .contains("msg=\"webhook delivery unverified\" kind=github reason=bad_signature remote=127.0.0.1:")
    });

    let good = github(
        &d,
        GITHUB_SECRET,
        "0b1c7e20-bbbb-11ee-8c90-0242ac120002",
        &body,
    );
    assert_eq!(good.status, 202, "{}", good.body);
    let reply = good.json();
    assert_eq!(reply["queued"], true, "{reply}");
    // Nothing was pending: the refused delivery queued no poll.
    assert_eq!(reply["coalesced"], false, "{reply}");
    let sent = Instant::now();
    d.wait_state("T-1 dispatched", Duration::from_secs(10), |st| {
        st["running"][0]["issue_identifier"] == "T-1"
    });
    eprintln!("dispatch {:?} after the signed delivery", sent.elapsed());
    // Exactly one poll since the first: the one the signed delivery asked for.
    assert_eq!(polls(&d), before + 1.0);
    let log = d.log_text();
    assert!(
        log.contains("msg=\"webhook delivery accepted\" kind=github delivery=0b1c7e20-bbbb-11ee-8c90-0242ac120002 event=issues issue=Codertocat/Hello-World#1 poll=queued"),
        "{log}"
    );
    assert!(
        !log.contains(GITHUB_SECRET),
        "the secret leaked into the log"
    );
    assert_eq!(
        metric(
            &d,
            "sortie_webhook_deliveries_total{kind=\"github\",outcome=\"accepted\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(
            &d,
            "sortie_webhook_deliveries_total{kind=\"github\",outcome=\"unverified\"}"
        ),
        1.0
    );

    // The same delivery again has no effect.
    let again = github(
        &d,
        GITHUB_SECRET,
        "0b1c7e20-bbbb-11ee-8c90-0242ac120002",
        &body,
    );
    assert_error(&again, 409, "webhook_replayed");
    assert_eq!(
        metric(
            &d,
            "sortie_webhook_deliveries_total{kind=\"github\",outcome=\"replayed\"}"
        ),
        1.0
    );
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

#[test]
fn every_kind_accepts_its_scheme_and_refuses_a_wrong_one() {
    let secrets = [
        ("SORTIE_WEBHOOK_SECRET_GITHUB", GITHUB_SECRET),
        ("SORTIE_WEBHOOK_SECRET_GITLAB", "gl-token-51d2e8"),
        ("SORTIE_WEBHOOK_SECRET_GITEA", "gitea-secret-90ab"),
        ("SORTIE_WEBHOOK_SECRET_JIRA", "jira-secret-3c4d"),
        ("SORTIE_WEBHOOK_SECRET_LINEAR", "lin_wh_secret_77ef"),
    ];
    let s = Setup::new(&slow_poll_workflow(), "[]");
    let d = s.start(&secrets);

    // GitHub: the labeled example.
    let labeled = fixture("issues-labeled.json");
    assert_eq!(github(&d, GITHUB_SECRET, "gh-1", &labeled).status, 202);
    assert_error(
        &github(&d, "wrong", "gh-2", &labeled),
        401,
        "webhook_unverified",
    );

    // GitLab: the token itself.
    let gl = br#"{"object_kind":"issue","object_attributes":{"iid":4},"project":{"path_with_namespace":"g/p"}}"#;
    let gitlab = |token: &str, uuid: &str| {
        deliver(
            &d,
            "gitlab",
            &[
                ("X-Gitlab-Event", "Issue Hook".into()),
                ("X-Gitlab-Token", token.into()),
                ("X-Gitlab-Event-UUID", uuid.into()),
            ],
            gl,
        )
    };
    assert_eq!(gitlab("gl-token-51d2e8", "gl-1").status, 202);
    assert_error(&gitlab("gl-token-51d2e", "gl-2"), 401, "webhook_unverified");
    assert_error(&gitlab("gl-token-51d2e8", "gl-1"), 409, "webhook_replayed");

    // Gitea: bare hex HMAC.
    let gt = br#"{"action":"opened","issue":{"number":2},"repository":{"full_name":"o/r"}}"#;
    let gitea = |secret: &str, id: &str| {
        deliver(
            &d,
            "gitea",
            &[
                ("X-Gitea-Event", "issues".into()),
                ("X-Gitea-Delivery", id.into()),
                ("X-Gitea-Signature", sign(secret, gt)),
            ],
            gt,
        )
    };
    assert_eq!(gitea("gitea-secret-90ab", "gt-1").status, 202);
    assert_error(
        &gitea("gitea-secret-90aB", "gt-2"),
        401,
        "webhook_unverified",
    );

    // Jira: `X-Hub-Signature: sha256=…`.
    let jb = br#"{"webhookEvent":"jira:issue_updated","issue":{"key":"PROJ-9"}}"#;
    let jira = |sig: String, id: &str| {
        deliver(
            &d,
            "jira",
            &[
                ("X-Atlassian-Webhook-Identifier", id.into()),
                ("X-Hub-Signature", sig),
            ],
            jb,
        )
    };
    assert_eq!(
        jira(format!("sha256={}", sign("jira-secret-3c4d", jb)), "j-1").status,
        202
    );
    assert_error(
        &jira(sign("jira-secret-3c4d", jb), "j-2"),
        401,
        "webhook_unverified",
    );

    // Linear: bare hex HMAC plus a fresh signed timestamp.
    let linear = |secret: &str, ts: i64, id: &str| {
        let body = format!(
            r#"{{"action":"update","type":"Issue","data":{{"identifier":"ENG-1"}},"webhookTimestamp":{ts}}}"#
        );
        deliver(
            &d,
            "linear",
            &[
                ("Linear-Event", "Issue".into()),
                ("Linear-Delivery", id.into()),
                ("Linear-Signature", sign(secret, body.as_bytes())),
            ],
            body.as_bytes(),
        )
    };
    assert_eq!(linear("lin_wh_secret_77ef", now_ms(), "l-1").status, 202);
    assert_error(
        &linear("lin_wh_secret_77ex", now_ms(), "l-2"),
        401,
        "webhook_unverified",
    );
    assert_error(
        &linear("lin_wh_secret_77ef", now_ms() - 5 * 60_000, "l-3"),
        401,
        "webhook_unverified",
    );

    // A signed body that is not JSON, an unknown kind, a body over the cap.
    let not_json = b"not json";
    let r = deliver(
        &d,
        "gitea",
        &[
            ("X-Gitea-Delivery", "gt-9".into()),
            ("X-Gitea-Signature", sign("gitea-secret-90ab", not_json)),
        ],
        not_json,
    );
    assert_error(&r, 400, "invalid_payload");
    assert_error(
        &deliver(&d, "bitbucket", &[], b"{}"),
        404,
        "webhook_not_configured",
    );
    // GET is not a delivery.
    let get = d
        .try_get("/api/v1/webhooks/github")
        .unwrap_or_else(|| panic!("no answer"));
    assert_eq!(get.status, 405);

    let log = d.log_text();
    for (_, secret) in secrets {
        assert!(
            !log.contains(secret),
            "a webhook secret leaked into the log"
        );
    }
    for (kind, reason) in [
        ("github", "bad_signature"),
        ("gitlab", "bad_signature"),
        ("gitea", "bad_signature"),
        ("jira", "malformed_signature"),
        ("linear", "bad_signature"),
        ("linear", "stale_timestamp"),
    ] {
        assert!(
            log.contains(&format!(
                "msg=\"webhook delivery unverified\" kind={kind} reason={reason}"
            )),
            "{kind} {reason}\n{log}"
        );
    }
    assert_eq!(
        metric(
            &d,
            "sortie_webhook_deliveries_total{kind=\"gitea\",outcome=\"bad_payload\"}"
        ),
        1.0
    );
}

/// A known kind without a secret never accepts a delivery, signed or not.
#[test]
fn a_kind_without_a_secret_is_not_served() {
    let s = Setup::new(&slow_poll_workflow(), "[]");
    let d = s.start(&[("SORTIE_WEBHOOK_SECRET_GITHUB", GITHUB_SECRET)]);
    let body = b"{}";
    let r = deliver(&d, "gitea", &[("X-Gitea-Signature", sign("", body))], body);
    assert_error(&r, 404, "webhook_not_configured");

    // Deliveries that fail verification draw on their sender's own bucket: past its burst
    // they are answered 429 with Retry-After.
    let mut limited = None;
    for i in 0..200 {
        let r = github(&d, "wrong", &format!("burst-{i}"), body);
        if r.status == 429 {
            limited = Some((i, r));
            break;
        }
        assert_error(&r, 401, "webhook_unverified");
    }
    let (i, r) = limited.unwrap_or_else(|| panic!("no 429 within 200 deliveries"));
    assert!(i >= 10, "limited after {i}");
    assert_error(&r, 429, "rate_limited");
    let retry: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After"));
    assert!(retry >= 1);
    assert!(
        metric(
            &d,
            "sortie_webhook_deliveries_total{kind=\"github\",outcome=\"rate_limited\"}"
        ) >= 1.0
    );
}

/// A delivery larger than the API's ordinary 64 KiB body cap is read and verified: forges'
/// push and issue payloads often are. Beyond the webhook cap the connection layer refuses it
/// unread; other routes keep the small cap.
#[test]
fn large_deliveries_are_accepted_up_to_the_webhook_cap() {
    let s = Setup::new(&slow_poll_workflow(), "[]");
    let d = s.start(&[("SORTIE_WEBHOOK_SECRET_GITHUB", GITHUB_SECRET)]);
    let mut payload: serde_json::Value = serde_json::from_slice(&fixture("issues-opened.json"))
        .unwrap_or_else(|e| panic!("fixture: {e}"));
    payload["issue"]["body"] = serde_json::Value::String("x".repeat(3 * 1024 * 1024));
    let body = serde_json::to_vec(&payload).unwrap_or_else(|e| panic!("{e}"));
    assert!(body.len() > 3 * 1024 * 1024);
    let big = github(&d, GITHUB_SECRET, "large-1", &body);
    assert_eq!(big.status, 202, "{}", big.body);
    assert_eq!(big.json()["queued"], true, "{}", big.body);

    let port = d.port;
    let too_large = format!(
        "POST /api/v1/webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: {}\r\n\r\n{{",
        8 * 1024 * 1024 + 1
    );
    let r = raw_exchange(port, too_large.as_bytes(), ANSWER)
        .unwrap_or_else(|| panic!("no answer to the oversized delivery"));
    assert_error(&r, 413, "payload_too_large");
    assert!(r.body.contains("8388608"), "{}", r.body);

    let elsewhere = format!(
        "POST /api/v1/refresh HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n\r\n{{",
        100 * 1024
    );
    let r = raw_exchange(port, elsewhere.as_bytes(), ANSWER)
        .unwrap_or_else(|| panic!("no answer to the oversized refresh"));
    assert_error(&r, 413, "payload_too_large");
    assert_eq!(
        metric(
            &d,
            "sortie_webhook_deliveries_total{kind=\"github\",outcome=\"accepted\"}"
        ),
        1.0
    );
}

/// The headers of a GitHub delivery signed with `secret`.
fn github_headers(secret: &str, delivery: &str, body: &[u8]) -> Vec<(&'static str, String)> {
    vec![
        ("X-GitHub-Event", "issues".into()),
        ("X-GitHub-Delivery", delivery.into()),
        (
            "X-Hub-Signature-256",
            format!("sha256={}", sign(secret, body)),
        ),
    ]
}

/// `sortie_webhook_body_bytes`: bytes reserved for webhook bodies now.
fn body_bytes(d: &Daemon) -> f64 {
    metric(d, "sortie_webhook_body_bytes")
}

/// A head announcing a 4 MiB delivery, with `extra` header lines; no body byte follows.
fn head_only(port: u16, kind: &str, extra: &str) -> Vec<u8> {
    format!(
        "POST /api/v1/webhooks/{kind} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: 4194304\r\n{extra}\r\n"
    )
    .into_bytes()
}

/// Nothing is buffered for a delivery that cannot be accepted: a kind that is not configured
/// (unknown, or known without a secret) and a delivery without its kind's signature header
/// are answered from the head alone. The client never sends a body byte, and the body's
/// deadline is 10 s, so an answer within 5 s cannot have waited for it.
#[test]
fn deliveries_that_cannot_be_verified_are_refused_before_the_body_is_read() {
    let s = Setup::new(&slow_poll_workflow(), "[]");
    let d = s.start(&[("SORTIE_WEBHOOK_SECRET_GITHUB", GITHUB_SECRET)]);
    let cases = [
        ("bitbucket", "", 404, "webhook_not_configured"),
        (
            "gitea",
            "X-Gitea-Signature: 00\r\n",
            404,
            "webhook_not_configured",
        ),
        // `X-Hub-Signature` is GitHub's legacy SHA-1 header, not the one verified.
        (
            "github",
            "X-GitHub-Delivery: d-1\r\nX-Hub-Signature: sha1=00\r\n",
            401,
            "webhook_unverified",
        ),
    ];
    for (kind, extra, status, code) in cases {
        let mut conn = connect_from([127, 0, 0, 1], d.port).unwrap_or_else(|e| panic!("{e}"));
        std::io::Write::write_all(&mut conn, &head_only(d.port, kind, extra))
            .unwrap_or_else(|e| panic!("{e}"));
        let r = read_response(&mut conn, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("{kind}: no answer before the body was sent"));
        assert_error(&r, status, code);
        assert_eq!(r.header("connection"), Some("close"), "{kind}");
        if kind == "github" {
            assert!(r.body.contains("missing_signature"), "{}", r.body);
        }
    }
    d.wait_until("the refusal is logged", ANSWER, || {
        d.log_text().contains(
            "msg=\"webhook delivery unverified\" kind=github reason=missing_signature remote=127.0.0.1:",
        )
    });
    assert_eq!(body_bytes(&d), 0.0);
    assert_eq!(
        metric(
            &d,
            "sortie_webhook_deliveries_total{kind=\"gitea\",outcome=\"not_configured\"}"
        ),
        1.0
    );
}

/// The replay memory keys on what the signature covers: a captured delivery re-sent under a
/// fresh delivery id is refused (GitHub), also within Linear's timestamp window.
#[test]
fn a_captured_delivery_resent_with_a_fresh_delivery_id_is_a_replay() {
    const LINEAR_SECRET: &str = "lin_wh_secret_5e1d";
    let s = Setup::new(&slow_poll_workflow(), "[]");
    let d = s.start(&[
        ("SORTIE_WEBHOOK_SECRET_GITHUB", GITHUB_SECRET),
        ("SORTIE_WEBHOOK_SECRET_LINEAR", LINEAR_SECRET),
    ]);
    let body = fixture("issues-opened.json");
    assert_eq!(github(&d, GITHUB_SECRET, "c0ffee-1", &body).status, 202);
    assert_error(
        &github(&d, GITHUB_SECRET, "c0ffee-2", &body),
        409,
        "webhook_replayed",
    );
    // Another signed body under a fresh id is a new delivery.
    let labeled = fixture("issues-labeled.json");
    assert_eq!(github(&d, GITHUB_SECRET, "c0ffee-3", &labeled).status, 202);

    let lb = format!(
        r#"{{"action":"update","type":"Issue","data":{{"identifier":"ENG-2"}},"webhookTimestamp":{}}}"#,
        now_ms()
    );
    let linear = |id: &str| {
        deliver(
            &d,
            "linear",
            &[
                ("Linear-Delivery", id.into()),
                ("Linear-Signature", sign(LINEAR_SECRET, lb.as_bytes())),
            ],
            lb.as_bytes(),
        )
    };
    assert_eq!(linear("lin-1").status, 202);
    assert_error(&linear("lin-2"), 409, "webhook_replayed");
    for kind in ["github", "linear"] {
        assert_eq!(
            metric(
                &d,
                &format!("sortie_webhook_deliveries_total{{kind=\"{kind}\",outcome=\"replayed\"}}")
            ),
            1.0,
            "{kind}"
        );
    }
}

/// Lines of `log` about refusals for `reason`, and the refusals they stand for: a refusal's
/// own line counts one plus its `suppressed=N`; a summary line (`refusals not logged`) counts
/// its `suppressed=N`.
fn refusals_logged(log: &str, reason: &str) -> (usize, usize) {
    let mut lines = 0;
    let mut refusals = 0;
    for l in log.lines() {
        if !l.contains(&format!(" reason={reason} ")) && !l.ends_with(&format!(" reason={reason}"))
        {
            continue;
        }
        let Some(n) = l
            .split_whitespace()
            .find_map(|f| f.strip_prefix("suppressed="))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        lines += 1;
        refusals += n + usize::from(!l.contains("msg=\"refusals not logged\""));
    }
    (lines, refusals)
}

/// Floods that are not verified draw on their sender's own bucket, never on the kind's: a
/// signed delivery is still accepted after them, from the same address. Refusals are logged
/// at most once a second per reason, every line counting the refusals it stands for.
#[test]
fn unverified_floods_leave_signed_deliveries_through_with_counted_log_lines() {
    const FLOOD: usize = 300;
    let s = Setup::new(&slow_poll_workflow(), "[]");
    let d = s.start(&[("SORTIE_WEBHOOK_SECRET_GITHUB", GITHUB_SECRET)]);
    let started = Instant::now();
    // Unsigned: refused from the head; the server closes each connection.
    let mut limited = 0;
    for i in 0..FLOOD {
        let r = deliver(
            &d,
            "github",
            &[("X-GitHub-Delivery", format!("u-{i}"))],
            b"{}",
        );
        match r.status {
            401 => assert_error(&r, 401, "webhook_unverified"),
            429 => {
                assert_error(&r, 429, "rate_limited");
                assert!(r.header("retry-after").is_some());
                limited += 1;
            }
            other => panic!("unsigned delivery {i}: {other} {}", r.body),
        }
    }
    assert!(limited > 0, "the sender's bucket never ran dry");
    // Wrong signatures on one keep-alive connection (reconnecting only when the server closes).
    let body = br#"{"zen":"flood"}"#;
    let mut conn = None;
    for i in 0..FLOOD {
        let c = conn.get_or_insert_with(|| {
            connect_from([127, 0, 0, 1], d.port).unwrap_or_else(|e| panic!("{e}"))
        });
        let headers = github_headers("wrong", &format!("b-{i}"), body);
        let bytes = delivery_bytes(d.port, "github", &headers, body, true);
        std::io::Write::write_all(c, &bytes).unwrap_or_else(|e| panic!("{e}"));
        let r = read_response(c, ANSWER).unwrap_or_else(|| panic!("no answer to delivery {i}"));
        assert!(
            r.status == 401 || r.status == 429,
            "{}: {}",
            r.status,
            r.body
        );
        if r.header("connection") == Some("close") {
            conn = None;
        }
    }
    // The kind's bucket is untouched: a signed delivery from the flooding address is accepted.
    let good = github(
        &d,
        GITHUB_SECRET,
        "signed-after-flood",
        &fixture("issues-opened.json"),
    );
    assert_eq!(good.status, 202, "{}", good.body);
    // Another address has a bucket of its own.
    assert_error(
        &deliver_from([127, 0, 0, 2], &d, "github", &[], b"{}"),
        401,
        "webhook_unverified",
    );

    for (reason, want) in [("missing_signature", FLOOD + 1), ("bad_signature", FLOOD)] {
        d.wait_until(
            &format!("every {reason} refusal accounted for"),
            ANSWER,
            || refusals_logged(&d.log_text(), reason).1 == want,
        );
        let (lines, _) = refusals_logged(&d.log_text(), reason);
        let secs = started.elapsed().as_secs() as usize;
        assert!(
            lines <= 2 * (secs + 1),
            "{lines} lines for {want} {reason} refusals in {secs} s"
        );
    }
}

/// Bodies being read are held within a budget (a client at most half of it): a delivery
/// beyond its sender's share is refused before its body is read, another client's delivery
/// is still served, and the bytes are released when a request ends.
#[test]
fn webhook_bodies_are_read_within_a_budget_and_released() {
    const LEN: usize = 8 * 1024 * 1024;
    let s = Setup::new(&slow_poll_workflow(), "[]");
    let d = s.start(&[("SORTIE_WEBHOOK_SECRET_GITHUB", GITHUB_SECRET)]);
    let head = format!(
        "POST /api/v1/webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {LEN}\r\nX-Hub-Signature-256: sha256=00\r\n\r\n",
        d.port
    );
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = connect_from([127, 0, 0, 1], d.port).unwrap_or_else(|e| panic!("{e}"));
        std::io::Write::write_all(&mut c, head.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        std::io::Write::write_all(&mut c, &vec![b' '; 1024 * 1024])
            .unwrap_or_else(|e| panic!("{e}"));
        held.push(c);
    }
    d.wait_until("both bodies admitted", ANSWER, || {
        body_bytes(&d) == (2 * LEN) as f64
    });
    let mut third = connect_from([127, 0, 0, 1], d.port).unwrap_or_else(|e| panic!("{e}"));
    std::io::Write::write_all(&mut third, head.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let r = read_response(&mut third, Duration::from_secs(5))
        .unwrap_or_else(|| panic!("the third body was waited for"));
    assert_error(&r, 503, "webhook_busy");
    assert!(r.header("retry-after").is_some());

    let body = fixture("issues-opened.json");
    let other = deliver_from(
        [127, 0, 0, 2],
        &d,
        "github",
        &github_headers(GITHUB_SECRET, "budget-1", &body),
        &body,
    );
    assert_eq!(other.status, 202, "{}", other.body);
    // That delivery's bytes are released with its request, which ends just after the answer.
    d.wait_until("the delivered body released", ANSWER, || {
        body_bytes(&d) == (2 * LEN) as f64
    });
    drop(held);
    d.wait_until("the bodies released", ANSWER, || body_bytes(&d) == 0.0);
    assert_eq!(
        metric(
            &d,
            "sortie_webhook_deliveries_total{kind=\"github\",outcome=\"busy\"}"
        ),
        1.0
    );
}
