//! The kinds the registry lists are the ones every other list shows: the webhook route's
//! kinds, the webhook metric's label values, the OpenAPI document's enum, and each forge's
//! contract test file.

use std::collections::BTreeSet;
use std::path::PathBuf;

use sortie::domain::contract::Contract;
use sortie::http::webhooks::verify::Kind;
use sortie::registry;

/// The tracker kinds whose descriptor declares a webhook scheme, read from the descriptors.
fn webhook_trackers() -> Vec<&'static str> {
    registry::TRACKERS
        .iter()
        .filter(|d| d.webhook.is_some())
        .map(|d| d.kind)
        .collect()
}

#[test]
fn webhook_kinds_metric_labels_and_openapi_enum_are_the_registrys() {
    let kinds = webhook_trackers();
    assert!(!kinds.is_empty());
    assert_eq!(registry::WEBHOOK_KINDS, kinds.as_slice());
    let route: Vec<&str> = Kind::all().map(Kind::as_str).collect();
    assert_eq!(route, kinds);
    assert_eq!(sortie::metrics::catalogue::WEBHOOK_KINDS, kinds.as_slice());
    let doc = sortie::http::openapi::document();
    let params = &doc["paths"]["/api/v1/webhooks/{kind}"]["post"]["parameters"];
    let kind_param = params
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "kind"))
        .cloned()
        .unwrap_or_default();
    let listed: Vec<&str> = kind_param["schema"]["enum"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(listed, kinds);
    for k in &kinds {
        assert!(
            kind_param["description"]
                .as_str()
                .is_some_and(|d| d.contains(k)),
            "{k} missing from {kind_param}"
        );
    }
}

#[test]
fn every_forge_names_an_existing_contract_test() {
    let mut files = BTreeSet::new();
    for d in registry::SCMS {
        let Contract::File(file) = d.contract else {
            panic!(
                "{}: forges have no shared suite; name the test file",
                d.kind
            );
        };
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join(file);
        assert!(path.is_file(), "{}: {} is missing", d.kind, path.display());
        assert!(files.insert(file), "{file} named twice");
    }
}

#[test]
fn kind_lookups_and_refusals_come_from_the_descriptors() {
    for d in registry::TRACKERS {
        assert_eq!(registry::tracker(d.kind).map(|t| t.kind), Some(d.kind));
        let defaults = registry::default_tracker_states(d.kind).map(|s| (s.active, s.terminal));
        assert_eq!(defaults, d.default_states.map(|s| (s.active, s.terminal)));
        for key in ["api_version", "user_agent"] {
            assert_eq!(
                registry::tracker_reads_key(d.kind, key),
                d.reads_keys.contains(&key)
            );
        }
    }
    assert!(registry::tracker_reads_key("jira", "api_version"));
    assert!(!registry::tracker_reads_key("github", "api_version"));
    assert!(!registry::tracker_reads_key("redmine", "api_version"));
    assert!(registry::default_tracker_states("file").is_none());
    assert_eq!(
        registry::default_tracker_states("jira").map(|s| s.terminal.len()),
        Some(0)
    );
}
