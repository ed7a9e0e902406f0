// Several workflows under one daemon: the header's switcher, the "all" screen (every workflow's
// row from GET /api/v1/workflows with its health and counts, and every workflow's running
// sessions from its own GET /api/v1/state?workflow=NAME, each marked with its workflow), and
// the screen of a chosen workflow that did not load (its problem, nothing to read). Neither
// screen has a change stream to follow (the stream is one workflow's), so both read again
// every POLL_MS.

import * as api from "./api.js";
import { hrefFor } from "./workflow.js";
import { h, panel, facts, num, tokens, relative, parseTime } from "./dom.js";

export const title = "All workflows";

/** How often the screens here read again, having no stream to tell them of a change. */
const POLL_MS = 5000;

const STATUS_WORDS = { ok: "ok", degraded: "degraded", not_loaded: "not loaded" };

function statusWord(status) {
  return STATUS_WORDS[status] || status || "unknown";
}

function badge(status) {
  return h("span", { class: `status ${status || ""}`, dataset: { status: status || "" } }, statusWord(status));
}

/**
 * The header's switcher: "All workflows", then every workflow with its status. `onChoose`
 * gets the chosen name, or null for all. A name the daemon does not list stays shown as such.
 */
export function switcher(list, chosen, onChoose) {
  const known = list.some((w) => w.name === chosen);
  const select = h("select", { id: "workflow-select", "aria-label": "Workflow",
    onchange: (e) => onChoose(e.target.value || null) },
  h("option", { value: "", selected: !chosen }, "All workflows"),
  list.map((w) => h("option", { value: w.name, selected: w.name === chosen, dataset: { status: w.status } },
    `${w.name} · ${statusWord(w.status)}`)),
  chosen && !known ? h("option", { value: chosen, selected: true, disabled: true }, `${chosen} · not served`) : null);
  const row = list.find((w) => w.name === chosen);
  return h("span", { class: "switcher", id: "workflow-switcher" }, select, row ? badge(row.status) : null);
}

/** Calls `ctx.changed` POLL_MS after each read; `stop` ends it. */
function poller(ctx) {
  let timer = null;
  return {
    again() { clearTimeout(timer); timer = setTimeout(() => ctx.changed(), POLL_MS); },
    stop() { clearTimeout(timer); },
  };
}

/**
 * The "all" screen. `ctx.target` is the screen a click on a workflow opens for it: the
 * overview, or the screen the address asked for before a workflow was chosen.
 */
export function create(ctx) {
  const target = ctx.target || "/ui/";
  const poll = poller(ctx);
  let list = null;
  let states = new Map();

  const render = () => ctx.render(view(list, states, target));

  return {
    async refresh() {
      try {
        list = (await api.workflows()).workflows || [];
        ctx.setWorkflows(list);
        const loaded = list.filter((w) => w.status !== "not_loaded");
        states = new Map(await Promise.all(loaded.map((w) => api.state({ workflow: w.name }).then(
          (s) => [w.name, { s }], (e) => [w.name, { error: e.message || String(e) }]))));
        const newest = Math.max(0, ...[...states.values()].map((x) => (x.s && parseTime(x.s.generated_at)) || 0));
        ctx.setGenerated(newest ? new Date(newest).toISOString() : null);
        render();
      } finally {
        poll.again();
      }
    },
    tick() {
      if (list) render();
    },
    unmount() {
      poll.stop();
    },
  };
}

function view(list, states, target) {
  const running = [];
  for (const w of list) {
    const x = states.get(w.name);
    for (const r of (x && x.s && x.s.running) || []) running.push([w.name, r]);
  }
  const unread = [...states.entries()].filter(([, x]) => x.error);
  return [
    h("h1", {}, "All workflows"),
    target !== "/ui/" ? h("p", { class: "muted", id: "choose-note" }, "This screen shows one workflow at a time: choose which.") : null,
    panel("Workflows", h("ul", { class: "rows", id: "workflow-rows" }, list.map((w) => workflowRow(w, target))),
      { id: "workflows", count: list.length, empty: "This daemon lists no workflow." }),
    panel("Running sessions", [
      running.length ? h("ul", { class: "rows" }, running.map(([name, r]) => runningRow(name, r))) : null,
      unread.map(([name, x]) => h("div", { class: "banner error", dataset: { unread: name } }, `${name}: ${x.error}`)),
    ].filter(Boolean), { id: "running-all", count: running.length, empty: "No session is running in any workflow." }),
  ];
}

function workflowRow(w, target) {
  const loaded = w.status !== "not_loaded";
  return h("li", { dataset: { workflow: w.name, status: w.status } },
    h("div", { class: "row-head" },
      h("a", { class: "id", href: hrefFor(target, w.name), "data-nav": true }, w.name),
      badge(w.status),
      h("span", { class: "muted title" }, w.path || "")),
    (w.problems || []).map((p) => h("div", { class: "msg problem" }, p)),
    loaded ? facts([
      ["running", num(w.running)],
      ["retrying", num(w.retrying)],
      ["held", num(w.held)],
      ["agent slots", w.max_concurrent_agents != null ? num(w.max_concurrent_agents) : null],
    ]) : h("div", { class: "muted" }, "Did not load: it runs nothing until its file is fixed."));
}

function runningRow(name, r) {
  const id = r.issue_identifier || "";
  return h("li", { dataset: { running: id, workflow: name } },
    h("div", { class: "row-head" },
      h("a", { class: "chip", href: hrefFor("/ui/", name), "data-nav": true, title: "Show this workflow" }, name),
      id ? h("a", { class: "id", href: hrefFor(`/ui/issues/${encodeURIComponent(id)}`, name), "data-nav": true }, id) : null,
      h("span", { class: "title" }, r.issue_title || ""),
      r.state ? h("span", { class: "muted" }, r.state) : null),
    r.status_text_full || r.status_text ? h("div", {}, r.status_text_full || r.status_text) : null,
    facts([
      ["turn", r.turn_count],
      ["tokens", r.tokens_measured === false ? "not reported" : tokens(r.tokens)],
      ["started", relative(r.started_at)],
      ["last event", r.last_event],
    ]));
}

/** A chosen workflow that did not load: what is wrong, and the way to the others. */
export const notLoaded = {
  title: "Not loaded",
  create(ctx) {
    const name = ctx.workflow;
    const poll = poller(ctx);
    return {
      async refresh() {
        try {
          const list = (await api.workflows()).workflows || [];
          ctx.setWorkflows(list);
          ctx.setGenerated(null);
          const w = list.find((x) => x.name === name);
          ctx.render([
            h("h1", {}, name),
            h("div", { class: "banner error", role: "alert", id: "not-loaded" },
              `Workflow ${name} did not load, so it runs nothing.`),
            panel("Why", w ? (w.problems || []).map((p) => h("div", { class: "msg problem" }, p)) : null,
              { id: "problems", empty: "The daemon no longer lists this workflow." }),
            w && w.path ? h("p", { class: "muted" }, "File: ", h("code", {}, w.path)) : null,
            h("p", {}, h("a", { href: hrefFor("/ui/", null), "data-nav": true }, "All workflows")),
          ]);
        } finally {
          poll.again();
        }
      },
      unmount() {
        poll.stop();
      },
    };
  },
};
