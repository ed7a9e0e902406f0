use std::collections::BTreeMap;
use std::path::Path;

use crate::config::{ConfigError, LoadOptions, ServiceConfig, parse_workflow};
use crate::pricing::settings::DEFAULT_FETCH_URL;
use crate::pricing::{FetchOffBy, TableLayer};

fn load(
    dir: &Path,
    block: &str,
    env: &[(&str, &str)],
) -> Result<(ServiceConfig, Vec<String>), ConfigError> {
    let text = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n{block}---\nHello\n"
    );
    let opts = LoadOptions {
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        cwd: dir.to_path_buf(),
        home: Some(dir.join("home")),
        ..LoadOptions::default()
    };
    let wf = parse_workflow(&text, &dir.join("WORKFLOW.md"), &opts)?;
    let fields = wf.warnings.iter().map(|w| w.field.clone()).collect();
    Ok((wf.config, fields))
}

#[test]
fn by_default_every_layer_is_on_and_the_shared_table_comes_from_litellm() {
    let d = tempfile::tempdir().unwrap();
    let (c, w) = load(d.path(), "", &[]).unwrap();
    let s = &c.price_table;
    assert!(s.fetch() && s.embedded);
    assert_eq!(s.fetch_url, DEFAULT_FETCH_URL);
    assert_eq!(
        (s.replace_file.clone(), s.replace_url.clone()),
        (None, None)
    );
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn the_environment_turns_the_download_off_over_the_setting_and_a_bad_value_warns() {
    let d = tempfile::tempdir().unwrap();
    for v in ["0", "false", "OFF", "no"] {
        let (c, _) = load(d.path(), "", &[("SORTIE_PRICE_TABLE_FETCH", v)]).unwrap();
        assert_eq!(c.price_table.fetch_off_by, Some(FetchOffBy::Env), "{v}");
    }
    let (c, _) = load(
        d.path(),
        "price_table: {fetch: false}\n",
        &[("SORTIE_PRICE_TABLE_FETCH", "1")],
    )
    .unwrap();
    assert_eq!(c.price_table.fetch_off_by, Some(FetchOffBy::Setting));
    let (c, w) = load(d.path(), "", &[("SORTIE_PRICE_TABLE_FETCH", "maybe")]).unwrap();
    assert!(c.price_table.fetch());
    assert_eq!(w, ["SORTIE_PRICE_TABLE_FETCH"]);
}

#[test]
fn bad_values_warn_and_take_the_defaults() {
    let d = tempfile::tempdir().unwrap();
    let (c, w) = load(
        d.path(),
        "price_table: {fetch: 3, embedded: nope, fetch_url: 7, colour: red}\n",
        &[],
    )
    .unwrap();
    assert!(c.price_table.fetch() && c.price_table.embedded);
    assert_eq!(c.price_table.fetch_url, DEFAULT_FETCH_URL);
    for f in [
        "price_table.fetch",
        "price_table.embedded",
        "price_table.fetch_url",
        "price_table.colour",
    ] {
        assert!(w.iter().any(|x| x == f), "{f} in {w:?}");
    }
    let (c, w) = load(d.path(), "price_table: {fetch_url: 'ftp://x/y'}\n", &[]).unwrap();
    assert_eq!(c.price_table.fetch_url, "ftp://x/y");
    assert_eq!(w, ["price_table.fetch_url"]);
}

#[test]
fn a_download_address_takes_var_values_and_registers_them_as_secrets() {
    let d = tempfile::tempdir().unwrap();
    let (c, _) = load(
        d.path(),
        "price_table: {replace_url: 'https://p.example/t.json?token=$PT'}\n",
        &[("PT", "s3cr3t-value")],
    )
    .unwrap();
    assert_eq!(
        c.price_table.replace_url.as_deref(),
        Some("https://p.example/t.json?token=s3cr3t-value")
    );
    assert!(c.secret_values.iter().any(|s| s == "s3cr3t-value"));
}

#[test]
fn replace_file_is_read_beside_the_workflow_and_a_bad_file_fails_the_load() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("mine.json"),
        r#"{"acme-1": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}}"#,
    )
    .unwrap();
    let (c, _) = load(
        d.path(),
        "price_table: {replace_file: $PF, replace_url: 'https://x/y'}\n",
        &[("PF", "mine.json")],
    )
    .unwrap();
    let f = c.price_table.replace_file.unwrap();
    assert_eq!(f.as_written, "mine.json");
    assert_eq!(f.table.layer, TableLayer::OperatorTable);
    assert!(f.table.lookup("acme-1").is_some());
    assert_eq!(c.price_table.replace_url, None, "replace_file wins");

    std::fs::create_dir_all(d.path().join("home")).unwrap();
    std::fs::write(d.path().join("home/p.json"), "{").unwrap();
    let e = load(d.path(), "price_table: {replace_file: ~/p.json}\n", &[]).unwrap_err();
    assert!(crate::config::is_replace_file_error(&e.to_string()));
    let msg = e.to_string();
    assert!(
        msg.starts_with("config: price_table.replace_file: ~/p.json: price table is not JSON"),
        "{msg}"
    );
    assert!(
        !msg.contains(&d.path().display().to_string()),
        "no resolved path: {msg}"
    );
    let e = load(d.path(), "price_table: {replace_file: missing.json}\n", &[]).unwrap_err();
    assert!(crate::config::is_replace_file_error(&e.to_string()), "{e}");
}
