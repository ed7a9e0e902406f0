//! The shared price table's download on the real binary, against a fake download server on
//! 127.0.0.1: a valid table lands in force, an invalid one counts a failure and leaves the
//! previous tables pricing, a restart keeps the validated copy, and the two ways to turn the
//! download off. Nothing here reaches the internet.

mod common;

use std::time::Duration;

use common::fake_server::{FakeServer, Reply};
use common::{Daemon, Project, set_server_port, spawn};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// What the fake serves at `/prices.json`.
struct Served {
    status: u16,
    body: String,
}

fn server(body: &str) -> FakeServer<Served> {
    FakeServer::start(
        Served {
            status: 200,
            body: body.to_string(),
        },
        |s, req| {
            if req.path != "/prices.json" {
                return Reply::empty(404);
            }
            Reply {
                status: s.status,
                headers: vec![("Content-Type".into(), "application/json".into())],
                body: s.body.clone().into_bytes(),
            }
        },
    )
}

const TABLE: &str = r#"{"claude-sonnet-4-5": {"input_cost_per_token": 4e-06, "output_cost_per_token": 2e-05},
    "acme-1": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}}"#;

/// A project whose shared table comes from `url`; the agent block configures `acme-1`.
fn project(url: &str, extra: &str) -> Project {
    let p = Project::new();
    p.issues(json!([]));
    p.fake_agent_workflow(
        "",
        &format!("claude-code:\n  model: acme-1\nprice_table:\n  fetch_url: '{url}'\n{extra}"),
    );
    p
}

/// Starts the daemon with `SORTIE_PRICE_TABLE_FETCH` set to `fetch_env` (`None`: unset).
fn start(p: &Project, fetch_env: Option<&str>) -> Daemon {
    spawn(&p.path("sortie.log"), Some(p.port()), |port| {
        set_server_port(&p.workflow(), port);
        let mut cmd = common::sortie_command();
        cmd.current_dir(p.path(""))
            .arg(p.workflow())
            .env_remove("RUST_LOG");
        match fetch_env {
            Some(v) => cmd.env("SORTIE_PRICE_TABLE_FETCH", v),
            None => cmd.env_remove("SORTIE_PRICE_TABLE_FETCH"),
        };
        cmd
    })
}

fn prices(d: &Daemon) -> Value {
    let r = d.get("/api/v1/prices");
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn wait_prices(d: &Daemon, what: &str, mut cond: impl FnMut(&Value) -> bool) -> Value {
    common::wait_for(what, WAIT, || {
        let doc = prices(d);
        cond(&doc).then_some(doc)
    })
}

fn acme(doc: &Value) -> &Value {
    doc["models"]
        .as_array()
        .and_then(|m| m.iter().find(|r| r["model"] == "acme-1"))
        .unwrap_or_else(|| panic!("no acme-1 row: {doc}"))
}

#[test]
fn a_valid_download_lands_in_force_over_the_built_in_table() {
    let fake = server(TABLE);
    let url = format!("{}/prices.json?token=s3cret", fake.url);
    let p = project(&url, "");
    let d = start(&p, Some("on"));
    let doc = wait_prices(&d, "the downloaded table", |doc| {
        doc["fetched"]["status"] == "loaded"
    });
    let f = &doc["fetched"];
    assert_eq!(f["in_force"], true);
    assert_eq!(f["off_by"], Value::Null);
    assert_eq!(
        f["address"], "http://127.0.0.1/prices.json",
        "no port, query or credential"
    );
    assert!(f["version"].as_str().unwrap().starts_with("sha256:"));
    assert!(f["as_of"].as_str().is_some());
    assert_eq!(f["models"], 2);
    assert!(f["next_try_at"].as_str().is_some());
    assert_eq!(
        (f["failures"].as_u64(), &f["error"]),
        (Some(0), &Value::Null)
    );
    assert_eq!(doc["table_in_force"]["layer"], "fetched");
    assert_eq!(doc["table_in_force"]["as_of"], f["as_of"]);
    assert_eq!(
        doc["embedded"]["in_force"], true,
        "it still prices what the download lacks"
    );
    let r = acme(&doc);
    assert_eq!(r["layer"], "fetched");
    assert_eq!(r["input"]["per_mtok"], 1.0);
    assert!(!doc.to_string().contains("s3cret"));
    assert_eq!(fake.requests("GET", "/prices.json").len(), 1);
}

#[test]
fn an_invalid_download_counts_a_failure_and_the_previous_tables_keep_pricing() {
    let fake = server(r#"{"acme-1": {"input_cost_per_token": "free"}}"#);
    let p = project(&format!("{}/prices.json", fake.url), "");
    let d = start(&p, None);
    let doc = wait_prices(&d, "the failed try", |doc| {
        doc["fetched"]["status"] == "failing"
    });
    let f = &doc["fetched"];
    assert_eq!(f["failures"], 1);
    assert_eq!(f["in_force"], false);
    assert_eq!(f["version"], Value::Null);
    assert!(f["failed_at"].as_str().is_some());
    assert_eq!(
        f["error"],
        "price table: acme-1.input_cost_per_token must be a non-negative number"
    );
    assert!(f["next_try_at"].as_str().is_some());
    assert_eq!(doc["table_in_force"]["layer"], "embedded");
    assert_eq!(acme(&doc)["cost_status"], "unpriced");
}

#[test]
fn a_restart_keeps_the_validated_copy_with_its_download_time() {
    let fake = server(TABLE);
    let p = project(&format!("{}/prices.json", fake.url), "");
    let d = start(&p, Some("1"));
    let first = wait_prices(&d, "the downloaded table", |doc| {
        doc["fetched"]["status"] == "loaded"
    });
    assert_eq!(d.stop(), Some(0));
    fake.with_state(|s| s.status = 500);
    let d = start(&p, Some("1"));
    let doc = wait_prices(&d, "the failed try after the restart", |doc| {
        doc["fetched"]["failures"] == 1
    });
    let f = &doc["fetched"];
    assert_eq!(f["status"], "failing");
    assert_eq!(f["in_force"], true, "the kept copy prices");
    assert_eq!(f["version"], first["fetched"]["version"]);
    assert_eq!(f["as_of"], first["fetched"]["as_of"]);
    assert_eq!(acme(&doc)["layer"], "fetched");
}

#[test]
fn the_environment_and_the_setting_turn_the_download_off() {
    let fake = server(TABLE);
    let url = format!("{}/prices.json", fake.url);
    let p = project(&url, "");
    let d = start(&p, Some("off"));
    let f = prices(&d)["fetched"].clone();
    assert_eq!(
        (f["status"].as_str(), f["off_by"].as_str()),
        (Some("off"), Some("SORTIE_PRICE_TABLE_FETCH"))
    );
    drop(d);
    let p = project(&url, "  fetch: false\n  embedded: false\n");
    let d = start(&p, None);
    let doc = prices(&d);
    assert_eq!(doc["fetched"]["off_by"], "price_table.fetch");
    assert_eq!(doc["embedded"]["status"], "off");
    assert!(
        doc["embedded"]["models"].as_u64().is_some(),
        "the revision facts stay"
    );
    assert_eq!(doc["table_in_force"], Value::Null);
    assert_eq!(fake.requests("GET", "/prices.json").len(), 0);
}

/// The shared download is tried only when a configured model needs it: with every model the
/// workflow names priced by the built-in table, the start logs one line and sends nothing (an
/// offline machine logs no failure a minute); a reload that names a model no table lists
/// makes the download due at once.
#[test]
fn no_download_is_tried_while_the_built_in_table_prices_every_configured_model() {
    let fake = server(TABLE);
    let url = format!("{}/prices.json", fake.url);
    let p = Project::new();
    p.issues(json!([]));
    let workflow = |model: &str| {
        p.fake_agent_workflow(
            "",
            &format!("claude-code:\n  model: {model}\nprice_table:\n  fetch_url: '{url}'\n"),
        )
    };
    workflow("claude-sonnet-4-5");
    let d = start(&p, None);
    d.wait_until("the one line about the download", WAIT, || {
        d.log_text().contains("price table download not needed")
    });
    // Several poll ticks later, still nothing was tried.
    let mut polls = std::collections::BTreeSet::new();
    d.wait_until("five poll ticks", WAIT, || {
        if let Some(s) = d.try_state() {
            polls.insert(s["health"]["poll"]["checked_at"].to_string());
        }
        polls.len() > 5
    });
    let doc = prices(&d);
    let f = &doc["fetched"];
    assert_eq!(
        (f["status"].as_str(), f["deferred"].as_bool()),
        (Some("not_loaded"), Some(true)),
        "{f}"
    );
    assert_eq!(
        (f["failures"].as_u64(), &f["next_try_at"]),
        (Some(0), &Value::Null)
    );
    assert_eq!(doc["table_in_force"]["layer"], "embedded");
    assert_eq!(doc["embedded"]["in_force"], true);
    assert_eq!(fake.requests("GET", "/prices.json").len(), 0);
    let log = d.log_text();
    assert_eq!(
        log.matches("price table download not needed").count(),
        1,
        "{log}"
    );
    assert!(!log.contains("price table download failed"), "{log}");

    // A model the built-in table does not list: the download is needed and tried.
    workflow("acme-1");
    let doc = wait_prices(&d, "the download after the reload", |doc| {
        doc["fetched"]["status"] == "loaded"
    });
    assert_eq!(doc["fetched"]["deferred"], false);
    assert_eq!(acme(&doc)["layer"], "fetched");
    assert_eq!(fake.requests("GET", "/prices.json").len(), 1);
    assert!(d.log_text().contains("price table download needed"));
}
