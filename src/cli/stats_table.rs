//! The readable form of a stats report: a summary, spend per period, and one table per
//! breakdown. Everything shown is a field of the JSON report; nothing is recomputed.

use std::fmt::Write;

use crate::store::stats::report::{Duration, Group, StatsReport, Tokens};

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |r| format!("{:.1}%", r * 100.0))
}

fn usd(v: Option<f64>, lower_bound: bool) -> String {
    match v {
        None => "-".into(),
        Some(c) if lower_bound => format!("≥${c:.2}"),
        Some(c) => format!("${c:.2}"),
    }
}

/// Seconds as `1h02m03s`, `4m05s` or `6.5s`.
fn secs(v: Option<f64>) -> String {
    let Some(s) = v else { return "-".into() };
    let whole = s.round() as i64;
    match whole {
        _ if s < 60.0 => format!("{s:.1}s"),
        w if w < 3600 => format!("{}m{:02}s", w / 60, w % 60),
        w => format!("{}h{:02}m{:02}s", w / 3600, w % 3600 / 60, w % 60),
    }
}

fn tokens(t: &Option<Tokens>) -> String {
    t.as_ref().map_or("-".into(), |t| t.total.to_string())
}

fn duration_line(d: &Duration) -> String {
    format!(
        "p50 {}, p95 {}, mean {} over {} runs",
        secs(d.p50),
        secs(d.p95),
        secs(d.mean),
        d.samples
    )
}

fn range_text(r: &StatsReport) -> String {
    match (&r.since, &r.until) {
        (None, None) => "every run on record".into(),
        (Some(s), None) => format!("runs completed since {s}"),
        (None, Some(u)) => format!("runs completed before {u}"),
        (Some(s), Some(u)) => format!("runs completed from {s} to before {u}"),
    }
}

fn summary(out: &mut String, r: &StatsReport) {
    let s = &r.summary;
    let _ = writeln!(out, "Workflow  {}", r.workflow_path);
    let _ = writeln!(out, "Database  {}", r.db_path);
    let _ = writeln!(out, "Range     {}", range_text(r));
    for w in &r.warnings {
        let _ = writeln!(out, "Warning   {w}");
    }
    let _ = writeln!(
        out,
        "\nRuns      {} over {} issues: {} succeeded, {} failed, {} stopped, {} cancelled (success rate {})",
        s.runs,
        s.issues,
        s.succeeded,
        s.failed,
        s.stopped,
        s.cancelled,
        pct(s.success_rate)
    );
    let _ = writeln!(
        out,
        "Duration  {} ({} zero, {} left out)",
        duration_line(&s.duration_seconds),
        s.zero_duration_runs,
        s.duration_excluded_runs
    );
    let _ = writeln!(
        out,
        "Tokens    {} total{}",
        tokens(&s.tokens),
        if s.tokens_unmeasured_runs + s.tokens_lower_bound_runs > 0 {
            format!(
                " (a lower bound: {} runs unmeasured, {} undercounted)",
                s.tokens_unmeasured_runs, s.tokens_lower_bound_runs
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "Cost      {} recorded, {} per succeeded run ({} runs unpriced, {} partial)",
        usd(s.cost_usd, s.cost_lower_bound),
        usd(s.cost_per_succeeded_run_usd, s.cost_lower_bound),
        s.cost_unpriced_runs,
        s.cost_partial_runs
    );
}

fn spend(out: &mut String, r: &StatsReport) {
    if r.spend.buckets.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nSpend by {}", r.spend.period);
    for b in &r.spend.buckets {
        let day = b.start.get(..10).unwrap_or(&b.start);
        let _ = writeln!(
            out,
            "  {day}  {:>6} runs  {}",
            b.runs,
            usd(b.cost_usd, b.cost_lower_bound)
        );
    }
}

fn breakdown(out: &mut String, title: &str, groups: &[Group]) {
    if groups.is_empty() {
        return;
    }
    let width = groups
        .iter()
        .map(|g| g.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let _ = writeln!(out, "\n{title}");
    let _ = writeln!(
        out,
        "  {:<width$}  {:>6}  {:>7}  {:>6}  {:>9}  {:>12}  {:>10}",
        "NAME", "RUNS", "SUCCESS", "SHARE", "P50", "TOKENS", "COST"
    );
    for g in groups {
        let _ = writeln!(
            out,
            "  {:<width$}  {:>6}  {:>7}  {:>6}  {:>9}  {:>12}  {:>10}",
            g.name,
            g.runs,
            pct(g.success_rate),
            pct(g.share),
            secs(g.duration_seconds.p50),
            tokens(&g.tokens),
            usd(g.cost_usd, g.cost_lower_bound)
        );
    }
}

/// The whole table.
pub fn render(r: &StatsReport) -> String {
    let mut out = String::new();
    summary(&mut out, r);
    spend(&mut out, r);
    for (title, groups) in [
        ("By status", &r.by_status),
        ("By agent kind", &r.by_adapter),
        ("By dispatch rule", &r.by_rule),
        ("By prompt template", &r.by_template),
        ("By model", &r.by_model),
        ("By retry trigger", &r.by_trigger),
        ("By origin", &r.by_origin),
        ("By usage provenance", &r.by_provenance),
    ] {
        breakdown(&mut out, title, groups);
    }
    if !r.skill_calls.by_skill.is_empty() {
        let _ = writeln!(out, "\nSkill calls");
        for s in &r.skill_calls.by_skill {
            let _ = writeln!(
                out,
                "  {}  {} calls in {} runs, {} failed",
                s.name, s.calls, s.runs, s.tool_errors
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_clock_time() {
        assert_eq!(secs(Some(6.5)), "6.5s");
        assert_eq!(secs(Some(1200.0)), "20m00s");
        assert_eq!(secs(Some(3723.0)), "1h02m03s");
        assert_eq!(secs(None), "-");
    }

    #[test]
    fn a_lower_bound_cost_is_marked() {
        assert_eq!(usd(Some(19.52), true), "≥$19.52");
        assert_eq!(usd(Some(12.0), false), "$12.00");
        assert_eq!(usd(None, true), "-");
    }
}
