// Overview: counts, what needs a person, running sessions, the retry queue, holds, totals,
// spend windows and rate limits — all from GET /api/v1/state, which already carries every sentence shown.

import * as api from "./api.js";
import { h, panel, rows, facts, issueLink, num, compact, tokens, duration, when, relative } from "./dom.js";
import { reactionRow } from "./reactions.js";
import { stageText, betweenRow } from "./stages.js";

export const title = "Overview";

export function create(ctx) {
  let last = null;
  return {
    async refresh() {
      last = await api.state();
      ctx.setGenerated(last.generated_at);
      ctx.render(view(last, ctx));
    },
    tick() {
      if (last) ctx.render(view(last, ctx));
    },
  };
}

const COUNT_LABELS = [
  ["running", "Running"],
  ["retrying", "Retrying"],
  ["attention", "Need attention"],
  ["held", "Held"],
  ["budget_exhausted", "Budget holds"],
  ["parked", "Parked"],
  ["pending_reactions", "PR reactions"],
  ["between_stages", "Between stages"],
];

function view(s, ctx) {
  const counts = s.counts || {};
  const cards = h("div", { class: "cards", id: "counts" },
    COUNT_LABELS.filter(([k]) => counts[k] !== undefined).map(([k, label]) =>
      h("div", { class: "card", dataset: { count: k } }, h("div", { class: "n" }, num(counts[k])), h("div", { class: "l" }, label))),
    slotsCard(s));
  return [
    h("h1", {}, "Overview"),
    cards,
    panel("Needs attention", rows(s.attention, (a) => attentionRow(a, ctx)), { id: "attention", count: (s.attention || []).length, empty: "Nothing needs a person." }),
    panel("Running sessions", rows(s.running, runningRow), { id: "running", count: (s.running || []).length, empty: "No session is running." }),
    panel("Retry queue", rows(s.retrying, (r) => retryRow(r, ctx)), { id: "retrying", count: (s.retrying || []).length, empty: "No retry is queued." }),
    panel("Pull request reactions", rows(s.pending_reactions, (r) => reactionRow(r, (label, action, attrs) => actionButton(label, action, ctx, attrs))),
      { id: "reactions", count: (s.pending_reactions || []).length, empty: "No pull request reaction is pending." }),
    panel("Between stages", rows(s.between_stages, betweenRow),
      { id: "between", count: (s.between_stages || []).length, empty: "No issue is between stages." }),
    h("div", { class: "grid2" },
      panel("Budget holds", rows(s.budget_exhausted, holdRow), { id: "budget", empty: "No issue is held at a budget." }),
      panel("Parked", rows(s.parked, parkedRow), { id: "parked", empty: "No issue is parked." }),
      panel("Held by the dispatch pass", rows(s.held, heldRow), { id: "held", empty: "The last pass held nothing back." }),
      panel("Agent totals", totals(s.agent_totals), { id: "totals" }),
      s.spend_ceiling ? panel("Spend windows", spendWindows(s.spend_ceiling), { id: "spend" }) : null,
      panel("Usage and rate limits", rateLimits(s.rate_limits), { id: "usage", empty: "No agent has reported rate limits." })),
  ];
}

function slotsCard(s) {
  const max = s.config && s.config.agent && s.config.agent.max_concurrent_agents;
  if (!max) return null;
  const free = Math.max(0, max - (s.running || []).length);
  return h("div", { class: "card", dataset: { count: "slots" } }, h("div", { class: "n" }, `${free}/${max}`), h("div", { class: "l" }, "Free slots"));
}

function head(r) {
  return h("div", { class: "row-head" },
    r.issue_identifier ? issueLink(r.issue_identifier) : null,
    h("span", { class: "title" }, r.issue_title || ""),
    r.state ? h("span", { class: "muted" }, r.state) : null);
}

function status(r) {
  const text = r.status_text_full || r.status_text;
  return text ? h("div", { title: r.status_text || "" }, text) : null;
}

function attentionRow(a, ctx) {
  const acked = !!a.acknowledged_at;
  let action = null;
  const act = a.action || {};
  if (act.kind === "acknowledge" && !acked) {
    action = actionButton("Acknowledge", () => api.acknowledge(a.id), ctx, { "data-action": "acknowledge", "data-id": a.id });
  } else if ((act.kind === "open_issue" || act.kind === "open_pull_request") && act.url) {
    action = h("a", { href: act.url, rel: "noopener noreferrer", target: "_blank" }, act.kind === "open_issue" ? "Open issue" : "Open pull request");
  }
  return h("li", { class: acked ? "acked" : null, dataset: { attention: a.id || "" } },
    h("div", { class: "row-head" },
      h("span", { class: `sev ${a.severity || ""}` }, a.severity || "info"),
      a.issue_identifier ? issueLink(a.issue_identifier) : null,
      h("span", { class: "title" }, a.reason_text || a.kind),
      a.since ? h("span", { class: "muted" }, "since ", when(a.since)) : null),
    a.why_text ? h("div", {}, a.why_text) : null,
    a.clears_text ? h("div", { class: "muted" }, a.clears_text) : null,
    acked ? h("div", { class: "muted" }, "Acknowledged ", when(a.acknowledged_at)) : null,
    action ? h("div", {}, action) : null);
}

function runningRow(r) {
  return h("li", { dataset: { running: r.issue_identifier || "" } },
    head(r),
    status(r),
    facts([
      ["stage", stageText(r)],
      ["turn", r.turn_count],
      ["tokens", r.tokens_measured === false ? "not reported" : tokens(r.tokens)],
      ["requests", r.api_request_count],
      ["model", r.model_name],
      ["started", relative(r.started_at)],
      ["last event", r.last_event],
    ]),
    r.last_message ? h("div", { class: "msg" }, r.last_message) : null,
    r.stall_text_full || r.stall_text ? h("div", { class: "stall" }, r.stall_text_full || r.stall_text) : null,
    r.stall_off_text ? h("div", { class: "muted" }, r.stall_off_text) : null);
}

function retryRow(r, ctx) {
  return h("li", { dataset: { retry: r.issue_identifier || "" } },
    head(r),
    status(r),
    facts([
      ["stage", stageText(r)],
      ["attempt", r.attempt],
      ["due", relative(r.due_at)],
      ["trigger", r.trigger],
      ["reaction", r.reaction_kind],
    ]),
    r.error ? h("div", { class: "msg" }, r.error) : null,
    h("div", {}, actionButton("Run now", () => api.runNow(r.issue_identifier), ctx, { "data-action": "run-now", "data-identifier": r.issue_identifier })));
}

function holdRow(b) {
  return h("li", {}, head(b), status(b), facts([
    ["sessions", b.used_sessions != null ? `${b.used_sessions}/${b.budget_sessions ?? "∞"}` : null],
    ["tokens", b.used_tokens != null ? `${compact(b.used_tokens)}/${compact(b.budget_tokens)}` : null],
    ["since", relative(b.exhausted_at)],
  ]));
}

function parkedRow(p) {
  return h("li", {}, head(p), status(p), facts([
    ["label", p.label ? `${p.label}${p.label_applied === false ? " (not applied)" : ""}` : null],
    ["parked", relative(p.parked_at)],
  ]));
}

function heldRow(x) {
  const hold = x.hold || {};
  return h("li", {}, head(x), status(x), hold.release_text ? h("div", { class: "muted" }, hold.release_text) : null);
}

function totals(t) {
  if (!t) return null;
  return h("dl", { class: "kv" },
    h("dt", {}, "Input tokens"), h("dd", {}, num(t.input_tokens)),
    h("dt", {}, "Output tokens"), h("dd", {}, num(t.output_tokens)),
    h("dt", {}, "Cache read"), h("dd", {}, num(t.cache_read_tokens)),
    h("dt", {}, "Cache write"), h("dd", {}, num(t.cache_write_tokens)),
    h("dt", {}, "Total"), h("dd", {}, num(t.total_tokens)),
    h("dt", {}, "Agent time"), h("dd", {}, duration(t.seconds_running)),
    h("dt", {}, "Unmeasured sessions"), h("dd", {}, num(t.unmeasured_sessions)));
}

function rateLimits(limits) {
  const out = [];
  for (const [kind, v] of Object.entries(limits || {})) {
    for (const w of (v && v.windows) || []) {
      out.push(h("li", {},
        h("div", { class: "row-head" }, h("b", {}, kind), h("span", { class: "title" }, w.label || "limit"),
          h("span", { class: `sev ${w.status === "allowed" ? "" : "warning"}` }, w.status || "")),
        facts([["used", w.used_percent != null ? `${w.used_percent}%` : null], ["resets", relative(w.resets_at)], ["reported", relative(w.reported_at || v.reported_at)]])));
    }
  }
  return out.length ? h("ul", { class: "rows" }, out) : null;
}

const SPEND_WINDOWS = [["daily", "Daily (UTC day)"], ["weekly", "Weekly (UTC, from Monday)"], ["monthly", "Monthly (UTC month)"]];

/** A US-dollar figure as the server's sentences write it. */
function usd(n) {
  if (n == null) return null;
  return n > 0 && n < 0.01 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`;
}

/** The spend windows against their ceilings; a window without a ceiling reads "no ceiling". */
function spendWindows(ceiling) {
  return h("ul", { class: "rows" }, SPEND_WINDOWS.map(([key, label]) => {
    const c = ceiling[key];
    if (!c) {
      return h("li", { dataset: { window: key } }, h("div", { class: "row-head" }, h("b", {}, label), h("span", { class: "muted" }, "no ceiling")));
    }
    const used = c.used_usd_complete === false ? `at least ${usd(c.used_usd)}` : usd(c.used_usd);
    return h("li", { dataset: { window: key, holding: c.holds_dispatch ? "true" : "false" } },
      h("div", { class: "row-head" }, h("b", {}, label),
        c.holds_dispatch ? h("span", { class: "sev critical" }, "holds dispatch") : null),
      facts([["spent", used], ["ceiling", usd(c.budget_usd)], ["resets", relative(c.resets_at)]]));
  }));
}

/** A button that runs an action once, shows its outcome, and refetches. */
export function actionButton(label, action, ctx, attrs = {}) {
  const note = h("span", { class: "muted", role: "status" });
  const btn = h("button", {
    type: "button", ...attrs,
    onclick: async () => {
      btn.disabled = true;
      note.textContent = " …";
      try {
        const res = await action();
        note.textContent = " Done.";
        // The page re-renders on the change; the server's sentence stays visible above it.
        flash((res && res.outcome_text) || `${label}: done.`);
        ctx.changed();
      } catch (e) {
        note.textContent = ` ${e.message}`;
        flash(e.message, true);
        btn.disabled = false;
      }
    },
  }, label);
  return h("span", {}, btn, note);
}

let flashTimer = null;

/** Shows a short message under the header for a few seconds (outcome of an action). */
export function flash(text, isError = false) {
  const el = document.getElementById("flash");
  if (!el) return;
  el.textContent = text;
  el.dataset.kind = isError ? "error" : "ok";
  el.hidden = false;
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => { el.hidden = true; }, 8000);
}
