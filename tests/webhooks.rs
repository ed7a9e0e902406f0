//! `POST /api/v1/webhooks/{kind}` through the real binary (file tracker, mock agent, a poll
//! interval of ten minutes): a signed delivery makes the next poll, and so the dispatch, happen
//! at once; a delivery that is not verified is refused and logged without effect. The GitHub
//! bodies are GitHub's own payload examples (tests/fixtures/github-webhooks/NOTICE).

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Daemon, Resp, Setup, issues, mock_workflow, raw_exchange};
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

fn deliver(d: &Daemon, kind: &str, headers: &[(&str, String)], body: &[u8]) -> Resp {
    let port = d.port;
    let mut raw = format!(
        "POST /api/v1/webhooks/{kind} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str("\r\n");
    let mut bytes = raw.into_bytes();
    bytes.extend_from_slice(body);
    raw_exchange(port, &bytes, ANSWER).unwrap_or_else(|| panic!("no answer to the {kind} delivery"))
}

fn github(d: &Daemon, secret: &str, delivery: &str, body: &[u8]) -> Resp {
    deliver(
        d,
        "github",
        &[
            ("X-GitHub-Event", "issues".into()),
            ("X-GitHub-Delivery", delivery.into()),
            (
                "X-Hub-Signature-256",
                format!("sha256={}", sign(secret, body)),
            ),
        ],
        body,
    )
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

    // A burst beyond the bucket is answered 429 with Retry-After, before any verification.
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
    assert!(i >= 50, "limited after {i}");
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
        "POST /api/v1/webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n\r\n{{",
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
