// Issue: status sentences, what happens next, the running session's live agent events (the
// stream subscribed with run=<dispatch_id>:<seq>), and the issue's run history.

import * as api from "./api.js";
import { h, panel, rows, facts, tokens, duration, when, relative, parseTime, clear } from "./dom.js";
import { actionButton } from "./overview.js";
import { reactionRow, kindLabel } from "./reactions.js";
import { betweenRow, stageText } from "./stages.js";

export const title = "Issue";

const MAX_EVENTS = 500;

export function create(ctx) {
  const identifier = ctx.params[0];
  let detail = null;
  let notFound = null;
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
      try {
        detail = await api.issue(identifier);
        notFound = null;
      } catch (e) {
        if (e.status !== 404) throw e;
        detail = null;
        notFound = e.message;
      }
      subscribe();
      list = h("ol", { class: "events", id: "events", "aria-live": "off" });
      ctx.render(view(identifier, detail, notFound, list, ctx));
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

function view(identifier, d, notFound, list, ctx) {
  if (!d) {
    return [h("h1", {}, identifier), h("div", { class: "banner" }, notFound || "Sortie knows nothing about this issue.")];
  }
  const issue = d.issue || {};
  const run = d.running;
  return [
    h("h1", {}, d.issue_identifier || identifier, " ",
      issue.title ? h("span", { class: "muted" }, issue.title) : null),
    h("section", { class: "panel", id: "status" },
      h("h2", {}, "Status"),
      h("p", { class: `status ${d.status || ""}` }, d.status_text_full || d.status_text || d.status || "—"),
      facts([["state", issue.state], ["type", issue.issue_type], ["labels", (issue.labels || []).join(", ")],
        ["workspace", d.workspace && d.workspace.path]]),
      issue.url ? h("p", {}, h("a", { href: issue.url, rel: "noopener noreferrer", target: "_blank" }, "Open in the tracker")) : null,
      d.retry ? h("p", {}, actionButton("Run now", () => api.runNow(d.issue_identifier || identifier), ctx, { "data-action": "run-now" })) : null,
      d.last_error ? h("div", { class: "msg" }, typeof d.last_error === "string" ? d.last_error : JSON.stringify(d.last_error)) : null),
    (d.pending_reactions || []).length ? panel("Pull request reactions",
      rows(d.pending_reactions, (r) => reactionRow(r, (label, action, attrs) => actionButton(label, action, ctx, attrs), { withIssue: false })),
      { id: "reactions", count: d.pending_reactions.length }) : null,
    d.between_stages ? panel("Between stages", h("ul", { class: "rows" }, betweenRow(d.between_stages)), { id: "between" }) : null,
    panel("What happens next", rows(d.next_outcomes, (o) =>
      h("li", {}, h("b", {}, o.condition || ""), h("div", {}, o.text || ""))), { id: "next", empty: "Nothing is scheduled for this issue." }),
    run ? h("section", { class: "panel", id: "session" },
      h("h2", {}, "Running session"),
      facts([["stage", stageText(run)], ["turn", run.turn_count], ["tokens", run.tokens_measured === false ? "not reported" : tokens(run.tokens)],
        ["model", run.model_name], ["started", relative(run.started_at)], ["session", run.session_id],
        ["reaction", run.reaction_kind ? `${kindLabel(run.reaction_kind)}${run.reaction_attempt ? `, try ${run.reaction_attempt}` : ""}` : null],
        ["pull request", run.pull_request ? `${run.pull_request.repository}#${run.pull_request.number}` : null]]),
      run.stall_text_full ? h("div", { class: "stall" }, run.stall_text_full) : null,
      h("h2", {}, "Agent events ", h("span", { class: "muted" }, "(live)")),
      list) : null,
    panel("Run history", history((d.history && d.history.runs) || []), { id: "history", empty: "No finished run yet." }),
  ];
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
      h("th", { class: "num" }, "Duration"), h("th", { class: "num opt" }, "Turns"), h("th", { class: "num" }, "Tokens"), h("th", {}, "Error"))),
    h("tbody", {}, runs.map((r) => h("tr", {},
      h("td", { class: "num" }, r.attempt ?? ""),
      h("td", { class: `status ${r.status || ""}` }, r.status || ""),
      h("td", {}, when(r.started_at)),
      h("td", { class: "num" }, runDuration(r)),
      h("td", { class: "num opt" }, r.turns_completed ?? ""),
      h("td", { class: "num" }, r.tokens ? tokens(r.tokens) : "not reported"),
      h("td", {}, r.error || r.agent_text || ""))))));
}

export function runDuration(r) {
  const a = parseTime(r.started_at);
  const b = parseTime(r.completed_at);
  return a !== null && b !== null ? duration((b - a) / 1000) : "—";
}
