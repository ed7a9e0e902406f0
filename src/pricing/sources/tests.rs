use super::*;
use crate::pricing::settings::ReplaceFile;

const T0: i64 = 1_790_000_000_000;

fn table(layer: TableLayer, body: &str) -> Arc<PriceTable> {
    Arc::new(PriceTable::parse(layer, "2026-11-30T00:00:00Z", body.as_bytes()).unwrap())
}

fn fetched_table() -> Arc<PriceTable> {
    table(
        TableLayer::Fetched,
        r#"{"m1": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}}"#,
    )
}

fn layers(s: &Sources) -> Vec<TableLayer> {
    s.tables().iter().map(|t| t.layer).collect()
}

#[test]
fn by_default_the_built_in_table_prices_and_the_shared_download_is_due_at_once() {
    let mut s = Sources::new(PriceTableSettings::default(), T0);
    assert_eq!(layers(&s), [TableLayer::Embedded]);
    let st = s.state();
    assert_eq!(st.operator, None);
    assert_eq!(st.fetched.status, SourceStatus::NotLoaded);
    assert_eq!(
        st.fetched.address.as_deref(),
        Some(crate::pricing::settings::DEFAULT_FETCH_URL)
    );
    assert_eq!(st.embedded.status, SourceStatus::Loaded);
    assert!(st.embedded.in_force);
    assert!(
        st.embedded
            .version
            .as_deref()
            .unwrap()
            .starts_with("litellm-")
    );
    let job = s.next_job(T0).unwrap();
    assert_eq!(job.feed, Feed::Fetched);
    assert_eq!(
        s.next_job(T0),
        None,
        "a running try is not handed out twice"
    );
}

#[test]
fn an_accepted_download_prices_over_the_built_in_table_and_is_tried_again_a_day_later() {
    let mut s = Sources::new(PriceTableSettings::default(), T0);
    let job = s.next_job(T0).unwrap();
    assert!(s.finish(&job, Ok(fetched_table()), T0 + 5));
    assert_eq!(layers(&s), [TableLayer::Fetched, TableLayer::Embedded]);
    let st = s.state().fetched;
    assert_eq!((st.status, st.in_force), (SourceStatus::Loaded, true));
    assert_eq!(st.models, Some(1));
    assert_eq!(st.next_try_at_ms, Some(T0 + 5 + REFRESH_MS));
    assert_eq!(s.next_job(T0 + REFRESH_MS), None);
    assert!(s.next_job(T0 + 5 + REFRESH_MS).is_some());
}

#[test]
fn failed_tries_count_back_off_and_leave_the_held_table_pricing() {
    let mut s = Sources::new(PriceTableSettings::default(), T0);
    let job = s.next_job(T0).unwrap();
    s.finish(&job, Ok(fetched_table()), T0);
    let job = s.next_job(T0 + REFRESH_MS).unwrap();
    s.finish(&job, Err(DownloadError::Status(500)), T0 + REFRESH_MS);
    let st = s.state().fetched;
    assert_eq!(st.status, SourceStatus::Failing);
    assert_eq!(st.failures, 1);
    assert_eq!(st.error.as_deref(), Some("status 500"));
    assert_eq!(st.failed_at_ms, Some(T0 + REFRESH_MS));
    assert_eq!(st.next_try_at_ms, Some(T0 + REFRESH_MS + FIRST_BACKOFF_MS));
    assert!(st.in_force, "the last accepted table still prices");
    assert_eq!(layers(&s), [TableLayer::Fetched, TableLayer::Embedded]);
    assert_eq!(backoff_ms(2), 2 * FIRST_BACKOFF_MS);
    assert_eq!(backoff_ms(40), MAX_BACKOFF_MS);
}

#[test]
fn turned_off_the_download_carries_no_table_facts_and_never_fails() {
    let mut s = Sources::new(PriceTableSettings::default(), T0);
    let job = s.next_job(T0).unwrap();
    s.finish(&job, Err(DownloadError::Transport("boom".into())), T0);
    let off = PriceTableSettings {
        fetch_off_by: Some(FetchOffBy::Env),
        embedded: false,
        ..PriceTableSettings::default()
    };
    s.apply(off, T0);
    let st = s.state();
    assert_eq!(st.fetched.status, SourceStatus::Off);
    assert_eq!(st.fetched.off_by, Some(FetchOffBy::Env));
    assert_eq!((st.fetched.failures, st.fetched.error.clone()), (0, None));
    assert_eq!(st.embedded.status, SourceStatus::Off);
    assert!(!st.embedded.in_force && st.embedded.models.is_some());
    assert!(s.tables().is_empty());
    assert_eq!(s.next_job(T0 + REFRESH_MS), None);
    assert_eq!(s.next_due_ms(), None);
}

#[test]
fn a_replace_file_table_replaces_the_others_and_keeps_its_first_load_time() {
    let file = table(
        TableLayer::OperatorTable,
        r#"{"m1": {"input_cost_per_token": 9e-06}}"#,
    );
    let settings = PriceTableSettings {
        replace_file: Some(ReplaceFile {
            as_written: "~/prices.json".into(),
            table: file,
        }),
        ..PriceTableSettings::default()
    };
    let mut s = Sources::new(settings.clone(), T0);
    assert_eq!(layers(&s), [TableLayer::OperatorTable]);
    s.apply(settings, T0 + 60_000);
    let op = s.state().operator.unwrap();
    assert_eq!(op.file.as_deref(), Some("~/prices.json"));
    assert_eq!(op.as_of.as_deref(), Some("2026-09-21T14:13:20.000Z"));
    assert!(op.in_force && !s.state().embedded.in_force);
    s.file_load_failed(T0 + 1, "config: price_table.replace_file: not found".into());
    let op = s.state().operator.unwrap();
    assert_eq!(op.status, SourceStatus::Failing);
    assert!(op.in_force, "the previous table stays in force");
}

#[test]
fn a_replace_url_table_prices_alone_once_a_download_of_it_passes() {
    let settings = PriceTableSettings {
        replace_url: Some("https://u:p@prices.example/t.json?k=1".into()),
        ..PriceTableSettings::default()
    };
    let mut s = Sources::new(settings, T0);
    let op = s.state().operator.unwrap();
    assert_eq!(op.address.as_deref(), Some("https://prices.example/t.json"));
    assert!(!op.in_force);
    assert_eq!(layers(&s), [TableLayer::Embedded]);
    let job = s.next_job(T0).unwrap();
    assert_eq!(job.feed, Feed::Operator);
    let t = table(
        TableLayer::OperatorTable,
        r#"{"m1": {"input_cost_per_token": 9e-06}}"#,
    );
    s.finish(&job, Ok(t), T0);
    assert_eq!(layers(&s), [TableLayer::OperatorTable]);
    assert!(!s.state().embedded.in_force);
}

#[test]
fn a_kept_copy_returns_only_for_its_address_and_a_result_for_an_old_address_is_dropped() {
    let mut s = Sources::new(PriceTableSettings::default(), T0);
    assert!(!s.restore(
        Feed::Fetched,
        &url_digest("https://other.example/x"),
        fetched_table()
    ));
    assert!(s.restore(
        Feed::Fetched,
        &url_digest(crate::pricing::settings::DEFAULT_FETCH_URL),
        fetched_table()
    ));
    assert_eq!(s.state().fetched.status, SourceStatus::Loaded);
    let job = s.next_job(T0).unwrap();
    s.apply(
        PriceTableSettings {
            fetch_url: "https://moved.example/p.json".into(),
            ..PriceTableSettings::default()
        },
        T0,
    );
    assert!(!s.finish(&job, Ok(fetched_table()), T0));
    assert_eq!(s.state().fetched.status, SourceStatus::NotLoaded);
}

fn needs(pairs: &[(&str, Option<&str>)]) -> Option<Vec<ModelNeed>> {
    Some(
        pairs
            .iter()
            .map(|(k, m)| ModelNeed {
                agent_kind: k.to_string(),
                model: m.map(str::to_string),
            })
            .collect(),
    )
}

fn kind_entry(input: f64, output: Option<f64>) -> crate::pricing::RateEntry {
    crate::pricing::RateEntry {
        rates: crate::pricing::ClassRates {
            input_per_mtok: Some(input),
            output_per_mtok: output,
            ..Default::default()
        },
        per_kind: true,
    }
}

#[test]
fn the_shared_download_waits_while_the_other_layers_price_every_configured_model() {
    // A model the built-in table lists: nothing to download, nothing tried.
    let covered = PriceTableSettings {
        needs: needs(&[("claude-code", Some("claude-sonnet-4-5"))]),
        ..PriceTableSettings::default()
    };
    let mut s = Sources::new(covered, T0);
    assert!(!s.download_needed());
    assert_eq!(s.next_job(T0), None);
    assert_eq!(s.next_due_ms(), None);
    let st = s.state().fetched;
    assert_eq!((st.status, st.deferred), (SourceStatus::NotLoaded, true));
    assert!(s.state().embedded.in_force);

    // A runtime default model: no table can be asked about it, so the table is downloaded…
    let default_model = PriceTableSettings {
        needs: needs(&[("mock", None)]),
        ..PriceTableSettings::default()
    };
    s.apply(default_model.clone(), T0);
    assert!(s.download_needed() && !s.state().fetched.deferred);
    // …unless a kind entry prices every model of the kind (input and output set).
    let mut rates = TokenRates::default();
    rates.entries.insert("mock".into(), kind_entry(3.0, None));
    s.set_token_rates(rates.clone());
    assert!(
        s.download_needed(),
        "a kind entry without an output rate prices nothing"
    );
    rates
        .entries
        .insert("mock".into(), kind_entry(3.0, Some(15.0)));
    s.set_token_rates(rates);
    assert!(!s.download_needed());
    assert_eq!(s.next_job(T0), None);

    // A model no layer lists makes the download due at once.
    let unknown = PriceTableSettings {
        needs: needs(&[("mock", None), ("codex", Some("acme-9"))]),
        ..PriceTableSettings::default()
    };
    s.apply(unknown, T0);
    assert_eq!(s.next_job(T0).map(|j| j.feed), Some(Feed::Fetched));

    // Settings that do not know the workflow's models download as before, and so does a
    // listed model once the built-in table is off.
    assert!(Sources::new(PriceTableSettings::default(), T0).download_needed());
    let off = PriceTableSettings {
        needs: needs(&[("claude-code", Some("claude-sonnet-4-5"))]),
        embedded: false,
        ..PriceTableSettings::default()
    };
    assert!(Sources::new(off, T0).download_needed());
}
