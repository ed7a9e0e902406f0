use super::*;

fn issue() -> Issue {
    Issue {
        id: "10".into(),
        identifier: "ABC-1".into(),
        ..Default::default()
    }
}

fn facts(issue: &Issue) -> HopFacts<'_> {
    HopFacts {
        issue,
        source_rule: "specify",
        target_rule: "implement",
        target_label: "stage-implement",
        chain_id: "c1",
        hop_count: 1,
        ceiling: 10,
    }
}

#[test]
fn advanced_names_both_stages_and_the_label() {
    let i = issue();
    let (kind, v) = advanced(&facts(&i), &[]);
    assert_eq!(kind, "stage.advanced");
    assert_eq!(
        v,
        json!({"issue_id": "10", "issue_identifier": "ABC-1", "source_rule": "specify",
               "target_rule": "implement", "target_label": "stage-implement", "chain_id": "c1",
               "hop_count": 1, "hop_ceiling": 10, "result": "advanced",
               "message": "Moved from stage specify to stage implement, and Sortie added `stage-implement`."})
    );
    let (_, v) = advanced(&facts(&i), &["stage-review".to_string()]);
    assert_eq!(v["result"], "partial");
    assert!(
        v["message"]
            .as_str()
            .unwrap_or("")
            .contains("removing stage-review failed")
    );
}

#[test]
fn not_advanced_says_why() {
    let i = issue();
    let (kind, v) = not_advanced(&facts(&i), &NotMade::Ceiling);
    assert_eq!(kind, "stage.not_advanced");
    assert_eq!(v["reason"], "ceiling");
    assert_eq!(v["result"], "ceiling");
    let (_, v) = not_advanced(&facts(&i), &NotMade::AddFailed("HTTP 403".into()));
    assert_eq!(v["reason"], "add_failed");
    assert_eq!(v["result"], "failed");
    assert_eq!(
        v["message"],
        "Stayed on stage specify: adding `stage-implement` failed (HTTP 403), so the issue was handed off."
    );
}
