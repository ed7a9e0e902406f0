// Overview: counts, what needs a person, running sessions, the retry queue, holds, totals,
// costs and charts, spend windows and rate limits. The rows and their sentences come from one
// GET /api/v1/state document (relative times are measured from its generated_at); costs and
// charts from GET /api/v1/stats and GET /api/v1/runs/issues, read again when a run starts or
// ends and at most once a minute otherwise.

import * as api from "./api.js";
import { h, panel, rows, facts, issueLink, num, compact, tokens, duration, when, relative, cost, usd, measureFrom, parseTime } from "./dom.js";
import { reactionRow } from "./reactions.js";
import { stageText, betweenRow } from "./stages.js";
import { charts, WINDOWS, windowQuery } from "./charts.js";

export const title = "Overview";

/** The longest the costs and charts wait for a re-read while no run starts or ends. */
const EXTRAS_MAX_AGE_MS = 60000;
/**
 * The shortest gap between two reads: a stats report aggregates every run on record, so a
 * burst of sessions starting and ending costs one read, made once the gap has passed.
 */
const EXTRAS_MIN_GAP_MS = 10000;

export function create(ctx) {
  let last = null;
  let extras = { window: "hours" };
  let extrasKey = null;
  let extrasAt = 0;
  let trailing = null;

  /** Reads the stats and issue costs when the running set changed or they are a minute old. */
  async function readExtras(s, force) {
    const key = `${(s.running || []).map((r) => r.dispatch_id).join(",")}|${s.counts && s.counts.retrying}|${extras.window}`;
    const age = Date.now() - extrasAt;
    if (!force && key === extrasKey && age < EXTRAS_MAX_AGE_MS) return;
    if (!force && extrasAt && age < EXTRAS_MIN_GAP_MS) {
      if (!trailing) trailing = setTimeout(() => { trailing = null; ctx.changed(); }, EXTRAS_MIN_GAP_MS - age);
      return;
    }
    extrasKey = key;
    extrasAt = Date.now();
    const nowMs = parseTime(s.generated_at) ?? Date.now();
    const win = WINDOWS[extras.window];
    const settle = (p) => p.then((v) => v, (e) => ({ error: e.message || String(e) }));
    const [all, windowed, sinceStart, issues] = await Promise.all([
      settle(api.stats({})),
      settle(api.stats(windowQuery(win, nowMs))),
      settle(api.stats({ since: s.started_at })),
      settle(api.runsByIssue({ limit: 50 })),
    ]);
    extras = { ...extras, all, windowed, sinceStart, issues, nowMs };
  }

  const render = () => ctx.render(view(last, extras, ctx, (w) => {
    extras.window = w;
    readExtras(last, true).then(render);
  }));

  return {
    async refresh() {
      last = await api.state();
      measureFrom(last.generated_at);
      ctx.setGenerated(last.generated_at);
      await readExtras(last, false);
      render();
    },
    tick() {
      if (last) render();
    },
    unmount() {
      clearTimeout(trailing);
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

/** Whether the document's cost keys apply: the seed shows cost exactly when this is served. */
function costsShown(s) {
  return s.cost_unpriced_running !== undefined;
}

function view(s, x, ctx, chooseWindow) {
  const counts = s.counts || {};
  const cards = h("div", { class: "cards", id: "counts" },
    COUNT_LABELS.filter(([k]) => counts[k] !== undefined).map(([k, label]) =>
      h("div", { class: "card", dataset: { count: k } }, h("div", { class: "n" }, num(counts[k])), h("div", { class: "l" }, label))),
    slotsCard(s),
    spentCard(x.all));
  return [
    h("h1", {}, "Overview"),
    cards,
    summary(s, x),
    panel("Needs attention", rows(s.attention, (a) => attentionRow(a, ctx)), { id: "attention", count: (s.attention || []).length, empty: "Nothing needs a person." }),
    panel("Running sessions", rows(s.running, (r) => runningRow(r, costsShown(s))), { id: "running", count: (s.running || []).length, empty: "No session is running." }),
    panel("Retry queue", rows(s.retrying, (r) => retryRow(r, ctx)), { id: "retrying", count: (s.retrying || []).length, empty: "No retry is queued." }),
    panel("Pull request reactions", rows(s.pending_reactions, (r) => reactionRow(r, (label, action, attrs) => actionButton(label, action, ctx, attrs))),
      { id: "reactions", count: (s.pending_reactions || []).length, empty: "No pull request reaction is pending." }),
    panel("Between stages", rows(s.between_stages, betweenRow),
      { id: "between", count: (s.between_stages || []).length, empty: "No issue is between stages." }),
    activity(s, x, chooseWindow),
    panel("Cost by issue", issueCosts(x.issues), { id: "issue-costs", empty: x.issues && x.issues.error ? x.issues.error : "No run has finished yet." }),
    h("div", { class: "grid2" },
      panel("Budget holds", rows(s.budget_exhausted, holdRow), { id: "budget", empty: "No issue is held at a budget." }),
      panel("Parked", rows(s.parked, parkedRow), { id: "parked", empty: "No issue is parked." }),
      panel("Held by the dispatch pass", rows(s.held, heldRow), { id: "held", empty: "The last pass held nothing back." }),
      panel("Agent totals", totals(s.agent_totals, s), { id: "totals" }),
      s.spend_ceiling ? panel("Spend windows", spendWindows(s.spend_ceiling), { id: "spend" }) : null,
      panel("Usage and rate limits", rateLimits(s.rate_limits), { id: "usage", empty: "No agent has reported rate limits." })),
  ];
}

/** The recorded cost of every run, all time, as a card. */
function spentCard(all) {
  const sm = all && all.summary;
  if (!sm || sm.cost_usd == null) return null;
  return h("div", { class: "card", dataset: { count: "spent" }, title: "The estimated cost recorded with every run" },
    h("div", { class: "n" }, `${sm.cost_lower_bound ? "≥ " : ""}${usd(sm.cost_usd)}`),
    h("div", { class: "l" }, "Spent (estimated)"));
}

/** Spend, tokens and runs by outcome over the chosen window, and the all-time totals. */
function activity(s, x, chooseWindow) {
  const win = WINDOWS[x.window];
  const pick = h("div", { class: "tabs", role: "group", "aria-label": "Window" },
    Object.entries(WINDOWS).map(([key, w]) => h("button", {
      type: "button", class: key === x.window ? "" : "secondary", "aria-pressed": key === x.window ? "true" : "false",
      "data-window": key, onclick: () => chooseWindow(key) }, w.label)));
  let body;
  if (!x.windowed) body = h("p", { class: "muted" }, "Loading…");
  else if (x.windowed.error) body = h("div", { class: "banner error" }, x.windowed.error);
  else body = h("div", { class: "figures" }, charts(x.windowed, win, x.nowMs));
  return h("section", { class: "panel", id: "activity", "aria-label": "Costs and activity" },
    h("div", { class: "panel-head" }, h("h2", {}, "Costs and activity"), pick),
    allTime(x.all, s),
    body);
}

/** What every run on record cost, and the running sessions' estimate. */
function allTime(all, s) {
  const sm = all && all.summary;
  if (!sm) return null;
  return facts([
    ["all runs", sm.runs ? `${num(sm.runs)} on ${num(sm.issues)} issues` : "none yet"],
    ["tokens", sm.tokens ? compact(sm.tokens.total) : null],
    ["spent", sm.cost_usd != null ? `${sm.cost_lower_bound ? "at least " : ""}${usd(sm.cost_usd)} estimated` : null],
    ["unpriced runs", sm.cost_unpriced_runs || null],
    ["running now", costsShown(s) && s.active_estimated_cost_usd != null ? `${usd(s.active_estimated_cost_usd)} estimated` : null],
  ]);
}

/**
 * The newest issues with runs and what their runs cost. How each issue stands is on its page
 * and in the rows above: this read is not the state document's, so its sentences would lag.
 */
function issueCosts(page) {
  const groups = (page && page.groups) || [];
  if (!groups.length) return null;
  return h("div", { class: "table-wrap" }, h("table", { id: "issue-costs-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Issue"), h("th", {}, "Title"), h("th", { class: "num opt" }, "Runs"),
      h("th", { class: "num opt" }, "Tokens"), h("th", { class: "num" }, "Cost"))),
    h("tbody", {}, groups.map((g) => {
      const t = g.totals || {};
      return h("tr", { dataset: { issue: g.issue_identifier } },
        h("td", {}, issueLink(g.issue_identifier)),
        h("td", {}, g.issue_title || ""),
        h("td", { class: "num opt" }, num(t.run_count)),
        h("td", { class: "num opt" }, t.tokens ? tokens(t.tokens) : "not reported"),
        h("td", { class: "num" }, cost(t.estimated_cost_usd, t.cost_status)));
    }))));
}

/**
 * Once nothing runs or waits for a retry after runs since the start: what was done and what it
 * cost, from the runs since the daemon started and how each issue they touched stands now.
 */
function summary(s, x) {
  const idle = !(s.running || []).length && !(s.retrying || []).length && !(s.between_stages || []).length;
  const sm = x.sinceStart && x.sinceStart.summary;
  if (!idle || !sm || !sm.runs) return null;
  const started = parseTime(s.started_at) ?? 0;
  const touched = ((x.issues && x.issues.groups) || []).filter((g) =>
    (g.runs || []).some((r) => (parseTime(r.completed_at) ?? 0) >= started));
  const outcomes = [["succeeded", sm.succeeded], ["failed", sm.failed], ["stopped", sm.stopped], ["cancelled", sm.cancelled]]
    .filter(([, n]) => n).map(([w, n]) => `${num(n)} ${w}`).join(", ");
  const spent = sm.cost_usd != null ? `${sm.cost_lower_bound ? "at least " : ""}${usd(sm.cost_usd)}` : null;
  const waiting = [...(s.held || []), ...(s.budget_exhausted || []), ...(s.parked || [])];
  return h("section", { class: "panel summary", id: "summary", "aria-label": "Summary" },
    h("h2", {}, "Summary"),
    h("p", {}, `Nothing is running or queued. Since sortie started ${relative(s.started_at) || ""}: `,
      h("b", {}, `${num(sm.runs)} ${sm.runs === 1 ? "run" : "runs"} on ${num(sm.issues)} ${sm.issues === 1 ? "issue" : "issues"}`),
      outcomes ? ` (${outcomes})` : "",
      sm.tokens ? `, ${compact(sm.tokens.total)} tokens` : "",
      spent ? [", estimated cost ", h("b", { id: "summary-cost" }, spent)] : ", cost not estimated",
      "."),
    touched.length ? h("ul", { class: "rows" }, touched.map((g) => h("li", { dataset: { summary: g.issue_identifier } },
      h("div", { class: "row-head" }, issueLink(g.issue_identifier), h("span", { class: "title" }, g.status_text || ""),
        cost(g.totals && g.totals.estimated_cost_usd, g.totals && g.totals.cost_status))))) : null,
    waiting.length ? h("p", { class: "muted" }, "Still waiting: ", waiting.map((w, i) => [i ? "; " : "", issueLink(w.issue_identifier), ` ${w.status_text || ""}`])) : null,
    (s.counts && s.counts.attention) ? h("p", {}, h("a", { href: "#attention" }, `${num(s.counts.attention)} ${s.counts.attention === 1 ? "item needs" : "items need"} a person.`)) : null);
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

export function attentionRow(a, ctx) {
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

function runningRow(r, showCost) {
  return h("li", { dataset: { running: r.issue_identifier || "" } },
    head(r),
    status(r),
    facts([
      ["stage", stageText(r)],
      ["turn", r.turn_count],
      ["tokens", r.tokens_measured === false ? "not reported" : tokens(r.tokens)],
      ["cost", showCost ? cost(r.estimated_cost_usd, r.cost_status) : null],
      ["issue cost", showCost && r.issue_cost_status ? cost(r.issue_estimated_cost_usd, r.issue_cost_status) : null],
      ["requests", r.api_request_count],
      ["model", r.model_name],
      ["started", relative(r.started_at)],
      ["last event", r.last_event],
      // Connections the sandbox's allowlist refused; absent while there are none.
      ["denied connections", r.sandbox_denied_connections],
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
      // Retry N starts the run the history records as attempt N + 1.
      ["retry", r.attempt],
      ["next attempt", r.attempt != null ? r.attempt + 1 : null],
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
  return h("li", { dataset: { held: x.issue_identifier || "" } }, head(x), status(x),
    hold.release_text ? h("div", { class: "muted" }, hold.release_text) : null,
    facts([["held", relative(hold.held_since)]]));
}

function totals(t, s) {
  if (!t) return null;
  const running = costsShown(s) && s.active_estimated_cost_usd != null;
  return h("dl", { class: "kv" },
    running ? [h("dt", {}, "Running cost"), h("dd", {}, `${usd(s.active_estimated_cost_usd)} estimated`)] : null,
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
