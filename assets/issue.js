// Issue: status sentences, what happens next, the running session's live agent events (the
// stream subscribed with run=<dispatch_id>:<seq>), what the issue cost, and its run history.
//
// GET /api/v1/{identifier} answers for the issues its live lists and run history hold; an
// issue only the dispatch pass holds (held[] of GET /api/v1/state) is answered from history or
// not at all. So the screen reads the state document too and answers for every issue it lists:
// the hold and what releases it, and the attention items about the issue or about every
// dispatch (a failed login, a failing database), which hold it as surely as its own row.

import * as api from "./api.js";
import { h, panel, rows, facts, tokens, duration, when, relative, parseTime, clear, cost, measureFrom, compact, num } from "./dom.js";
import { actionButton, attentionRow } from "./overview.js";
import { reactionRow, kindLabel, prLoopList } from "./reactions.js";
import { betweenRow, stageText } from "./stages.js";

export const title = "Issue";

const MAX_EVENTS = 500;

export function create(ctx) {
  const identifier = ctx.params[0];
  let detail = null;
  let notFound = null;
  let listed = null;
  let dispatchId = null;
  let events = new Map(); // seq -> event, for the current dispatch
  let list = null;

  function subscribe() {
    const run = detail && detail.running;
    const id = run && run.dispatch_id;
    if (id !== dispatchId) {
      dispatchId = id || null;
      events = new Map();
    }
    for (const e of (detail && detail.recent_events) || []) if (typeof e.seq === "number") events.set(e.seq, e);
    const last = events.size ? Math.max(...events.keys()) : 0;
    ctx.stream.setRuns(dispatchId ? { [dispatchId]: last } : {});
  }

  function renderEvents() {
    if (!list) return;
    clear(list);
    const sorted = [...events.values()].sort((a, b) => a.seq - b.seq).slice(-MAX_EVENTS);
    for (const e of sorted) list.append(eventRow(e));
    list.scrollTop = list.scrollHeight;
  }

  return {
    async refresh() {
      const [d, s] = await Promise.all([
        api.issue(identifier).then((v) => ({ v }), (e) => {
          if (e.status !== 404) throw e;
          return { missing: e.message };
        }),
        api.state(),
      ]);
      detail = d.v || null;
      notFound = d.missing || null;
      measureFrom(s.generated_at);
      ctx.setGenerated(s.generated_at);
      listed = fromState(s, (detail && detail.issue_identifier) || identifier);
      subscribe();
      list = h("ol", { class: "events", id: "events", "aria-live": "off" });
      ctx.render(view(identifier, detail, notFound, listed, list, ctx));
      renderEvents();
    },
    onAgentEvent(e) {
      if (!dispatchId || e.dispatch_id !== dispatchId) return;
      events.set(e.seq, e);
      if (list) {
        list.append(eventRow(e));
        while (list.children.length > MAX_EVENTS) list.firstChild.remove();
        list.scrollTop = list.scrollHeight;
      }
    },
    unmount() {
      ctx.stream.setRuns({});
    },
  };
}

/**
 * What the state document says about the issue beyond its detail: its held[] row, and the
 * attention items that stop it: those about the issue, and the critical ones about the
 * process (no issue is dispatched while one stands), of which an item about one agent kind
 * (a failed login, a usage limit) only when the issue's hold names that kind.
 */
function fromState(s, identifier) {
  const held = (s.held || []).find((r) => r.issue_identifier === identifier) || null;
  const heldKind = held && held.hold && held.hold.agent_kind;
  const attention = (s.attention || []).filter((a) => {
    if (a.issue_identifier) return a.issue_identifier === identifier;
    const kind = a.evidence && a.evidence.agent_kind;
    return kind ? kind === heldKind : a.severity === "critical";
  });
  return { held, attention, showCost: s.cost_unpriced_running !== undefined };
}

function view(identifier, d, notFound, listed, list, ctx) {
  const held = listed.held;
  if (!d && !held) {
    return [h("h1", {}, identifier),
      h("div", { class: "banner", id: "not-found" }, notFound || "Sortie knows nothing about this issue."),
      listed.attention.length ? panel("Needs a person", rows(listed.attention, (a) => attentionRow(a, ctx)), { id: "attention" }) : null];
  }
  // A held issue without a live row: the hold decides its status, as the Overview lists it.
  const byHold = held && (!d || d.status === "history");
  const issue = (d && d.issue) || {};
  const title = issue.title || (held && held.issue_title);
  const state = issue.state || (held && held.state);
  const url = issue.url || (held && held.issue_url);
  const labels = issue.labels || (held && held.issue_labels) || [];
  const run = d && d.running;
  const statusWord = byHold ? "held" : (d.status || "");
  const sentence = byHold ? held.status_text_full : (d.status_text_full || d.status_text || d.status || "—");
  const next = (d && d.next_outcomes) || [];
  return [
    h("h1", {}, (d && d.issue_identifier) || identifier, " ", title ? h("span", { class: "muted" }, title) : null),
    h("section", { class: "panel", id: "status" },
      h("h2", {}, "Status"),
      h("p", { class: `status ${statusWord}`, dataset: { status: statusWord } }, sentence),
      facts([["state", state], ["type", issue.issue_type || (held && held.issue_type)], ["labels", labels.join(", ")],
        ["workspace", d && d.workspace && d.workspace.path]]),
      url ? h("p", {}, h("a", { href: url, rel: "noopener noreferrer", target: "_blank" }, "Open in the tracker")) : null,
      d && d.retry ? h("p", {}, actionButton("Run now", () => api.runNow(d.issue_identifier || identifier), ctx, { "data-action": "run-now" })) : null,
      d && d.last_error ? h("div", { class: "msg" }, typeof d.last_error === "string" ? d.last_error : JSON.stringify(d.last_error)) : null),
    held ? holdPanel(held) : null,
    listed.attention.length ? panel("Needs a person", rows(listed.attention, (a) => attentionRow(a, ctx)),
      { id: "attention", count: listed.attention.length }) : null,
    d && (d.pending_reactions || []).length ? panel("Pull request reactions",
      rows(d.pending_reactions, (r) => reactionRow(r, (label, action, attrs) => actionButton(label, action, ctx, attrs), { withIssue: false })),
      { id: "reactions", count: d.pending_reactions.length }) : null,
    d ? prLoopPanel(d.pr_loop) : null,
    d && d.between_stages ? panel("Between stages", h("ul", { class: "rows" }, betweenRow(d.between_stages)), { id: "between" }) : null,
    panel("What happens next", next.length ? rows(next, (o) =>
      h("li", {}, h("b", {}, o.condition || ""), h("div", {}, o.text || ""))) : held ? rows([held.hold || {}], (hold) =>
      h("li", {}, h("b", {}, (hold.release_text || "When the hold is released").replace(/\.$/, "")),
        h("div", {}, "The next poll dispatches the issue, if an agent slot is free."))) : null,
    { id: "next", empty: "Nothing is scheduled for this issue." }),
    run ? h("section", { class: "panel", id: "session" },
      h("h2", {}, "Running session"),
      facts([["stage", stageText(run)], ["turn", run.turn_count], ["tokens", run.tokens_measured === false ? "not reported" : tokens(run.tokens)],
        ["cost", listed.showCost ? cost(run.estimated_cost_usd, run.cost_status) : null],
        ["issue cost", listed.showCost && run.issue_cost_status ? cost(run.issue_estimated_cost_usd, run.issue_cost_status) : null],
        ["model", run.model_name], ["started", relative(run.started_at)], ["session", run.session_id],
        ["reaction", run.reaction_kind ? `${kindLabel(run.reaction_kind)}${run.reaction_attempt ? `, try ${run.reaction_attempt}` : ""}` : null],
        ["pull request", run.pull_request ? `${run.pull_request.repository}#${run.pull_request.number}` : null]]),
      run.stall_text_full ? h("div", { class: "stall" }, run.stall_text_full) : null,
      h("h2", {}, "Agent events ", h("span", { class: "muted" }, "(live)")),
      list) : null,
    d && d.history ? spent(d.history.totals) : null,
    panel("Run history", history((d && d.history && d.history.runs) || []), { id: "history", empty: "No finished run yet." }),
  ];
}

/** What each configured reaction recorded in the issue's pass (`pr_loop`). */
function prLoopPanel(loop) {
  const list = prLoopList(loop);
  return list ? panel("Reactions in this pass", list, { id: "pr-loop" }) : null;
}

/** The hold of an issue the latest dispatch pass held back, and what releases it. */
function holdPanel(x) {
  const hold = x.hold || {};
  return h("section", { class: "panel", id: "hold", dataset: { reason: hold.reason || "" } },
    h("h2", {}, "Held by the dispatch pass"),
    h("p", {}, h("span", { class: "sev warning" }, "held"), " ", hold.reason_text || x.status_text || ""),
    hold.release_text ? h("p", { class: "muted", id: "release" }, hold.release_text) : null,
    facts([["since", relative(hold.held_since)], ["agent", hold.agent_kind],
      ["blocked by", (hold.blockers || []).map((b) => `${b.issue_identifier}${b.state ? ` (${b.state})` : ""}`).join(", ")],
      ["slots", hold.slot ? `${hold.slot.used}/${hold.slot.limit}` : null], ["resets", relative(hold.resets_at)]]));
}

/** What all of the issue's runs cost together. */
function spent(t) {
  if (!t) return null;
  return h("section", { class: "panel", id: "issue-cost" },
    h("h2", {}, "Cost"),
    facts([["runs", num(t.run_count)], ["tokens", t.tokens && t.tokens.total_tokens != null ? compact(t.tokens.total_tokens) : "not reported"],
      ["spent", cost(t.estimated_cost_usd, t.cost_status)]]));
}

function eventRow(e) {
  const at = parseTime(e.at);
  return h("li", { dataset: { seq: e.seq } },
    h("span", { class: "kind" }, at ? new Date(at).toLocaleTimeString() : "", " ", e.event || ""),
    e.text || e.message || e.tool_line || "");
}

function history(runs) {
  if (!runs.length) return null;
  return h("div", { class: "table-wrap" }, h("table", {},
    h("thead", {}, h("tr", {}, h("th", {}, "Attempt"), h("th", {}, "Status"), h("th", {}, "Started"),
      h("th", { class: "num opt" }, "Duration"), h("th", { class: "num opt" }, "Turns"), h("th", { class: "num opt" }, "Tokens"),
      h("th", { class: "num" }, "Cost"), h("th", {}, "Error"))),
    h("tbody", {}, runs.map((r) => h("tr", { dataset: { run: r.run_id ?? "" } },
      h("td", { class: "num" }, r.attempt ?? ""),
      h("td", { class: `status ${r.status || ""}` }, r.status || ""),
      h("td", {}, when(r.started_at)),
      h("td", { class: "num opt" }, runDuration(r)),
      h("td", { class: "num opt" }, r.turns_completed ?? ""),
      h("td", { class: "num opt" }, r.tokens ? tokens(r.tokens) : "not reported"),
      h("td", { class: "num cost" }, cost(r.estimated_cost_usd, r.cost_status)),
      h("td", {}, r.error || r.agent_text || ""))))));
}

export function runDuration(r) {
  const a = parseTime(r.started_at);
  const b = parseTime(r.completed_at);
  return a !== null && b !== null ? duration((b - a) / 1000) : "—";
}
