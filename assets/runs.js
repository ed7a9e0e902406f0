// Runs: run history with filters and paging (GET /api/v1/runs), or grouped by issue
// (GET /api/v1/runs/issues). Filters and the cursor live in the address so a view can be
// bookmarked; "Older" follows next_cursor, "Newest" drops it.

import * as api from "./api.js";
import { h, rows, issueLink, tokens, when, clear, cost } from "./dom.js";
import { runDuration } from "./issue.js";
import { runStage } from "./stages.js";

export const title = "Runs";

const STATUSES = ["", "succeeded", "failed", "cancelled", "ci_failed", "needs_person", "budget_stopped", "usage_limited"];

export function create(ctx) {
  const results = h("div", { id: "results" });
  let built = false;
  let form = null;

  function params() {
    const q = new URLSearchParams(location.search);
    return {
      view: q.get("view") === "issues" ? "issues" : "runs",
      issue: q.get("issue") || "",
      status: q.get("status") || "",
      rule: q.get("rule") || "",
      stage: q.get("stage") || "",
      cursor: q.get("cursor") || "",
      limit: q.get("limit") || "",
    };
  }

  function go(p) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(p)) if (v && !(k === "view" && v === "runs")) q.set(k, v);
    const s = q.toString();
    ctx.navigate(`/ui/runs${s ? "?" + s : ""}`, { replace: false });
  }

  function buildForm(p) {
    const input = (name, label, value) => h("label", {}, label, h("input", { name, value, autocomplete: "off", placeholder: "any" }));
    const status = h("select", { name: "status" }, STATUSES.map((s) => h("option", { value: s, selected: s === p.status }, s || "any")));
    const view = h("select", { name: "view" },
      h("option", { value: "runs", selected: p.view === "runs" }, "runs"),
      h("option", { value: "issues", selected: p.view === "issues" }, "by issue"));
    form = h("form", { class: "filters", role: "search",
      onsubmit: (e) => {
        e.preventDefault();
        const f = new FormData(form);
        go({ view: f.get("view"), issue: f.get("issue").trim(), status: f.get("status"), rule: f.get("rule").trim(), stage: f.get("stage").trim(), limit: params().limit });
      } },
      h("label", {}, "Show", view),
      input("issue", "Issue", p.issue),
      h("label", {}, "Status", status),
      input("rule", "Rule", p.rule),
      input("stage", "Stage", p.stage),
      h("button", { type: "submit" }, "Apply"));
    return form;
  }

  return {
    async refresh() {
      const p = params();
      if (!built) {
        ctx.render([h("h1", {}, "Runs"), h("section", { class: "panel" }, buildForm(p), results)]);
        built = true;
      }
      const query = { issue: p.issue, status: p.status, rule: p.rule, stage: p.stage, cursor: p.cursor, limit: p.limit };
      let body;
      let next = null;
      try {
        const page = p.view === "issues" ? await api.runsByIssue(query) : await api.runs(query);
        next = page && page.next_cursor;
        body = p.view === "issues" ? groupsView(page) : runsView(page);
      } catch (e) {
        body = h("div", { class: "banner error" }, e.message);
      }
      clear(results);
      results.append(body);
      const pager = h("div", { class: "pager" },
        p.cursor ? h("button", { type: "button", class: "secondary", onclick: () => go({ ...p, cursor: "" }) }, "Newest") : null,
        next ? h("button", { type: "button", class: "secondary", "data-action": "older", onclick: () => go({ ...p, cursor: String(next) }) }, "Older →") : null);
      results.append(pager);
    },
  };
}

function runsView(page) {
  const runs = (page && page.runs) || [];
  if (!runs.length) return h("p", { class: "empty" }, "No run matches.");
  return h("div", { class: "table-wrap" }, h("table", { id: "runs-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Issue"), h("th", {}, "Status"), h("th", { class: "opt" }, "Rule"), h("th", { class: "opt" }, "Stage"), h("th", { class: "opt" }, "Attempt"), h("th", {}, "Completed"),
      h("th", { class: "num opt" }, "Duration"), h("th", { class: "num opt" }, "Tokens"), h("th", { class: "num" }, "Cost"), h("th", { class: "opt" }, "Error"))),
    h("tbody", {}, runs.map((r) => h("tr", { dataset: { run: r.run_id ?? "" } },
      h("td", {}, r.issue_identifier ? issueLink(r.issue_identifier) : ""),
      h("td", { class: `status ${r.status || ""}` }, r.status || ""),
      h("td", { class: "rule opt" }, r.rule_name || ""),
      h("td", { class: "stage opt" }, runStage(r) || ""),
      h("td", { class: "num opt" }, r.attempt ?? ""),
      h("td", {}, when(r.completed_at)),
      h("td", { class: "num opt" }, runDuration(r)),
      h("td", { class: "num opt" }, r.tokens ? tokens(r.tokens) : "not reported"),
      h("td", { class: "num cost" }, cost(r.estimated_cost_usd, r.cost_status)),
      h("td", { class: "opt" }, r.error || ""))))));
}

function groupsView(page) {
  const groups = (page && page.groups) || [];
  if (!groups.length) return h("p", { class: "empty" }, "No issue matches.");
  return rows(groups, (g) => h("li", {},
    h("div", { class: "row-head" }, issueLink(g.issue_identifier), h("span", { class: "title" }, g.issue_title || ""),
      g.totals ? cost(g.totals.estimated_cost_usd, g.totals.cost_status) : null),
    h("div", {}, g.status_text_full || g.status_text || ""),
    h("div", { class: "facts" }, (g.runs || []).map((r) =>
      h("span", {}, `#${r.attempt ?? "?"} `, h("b", { class: `status ${r.status || ""}` }, r.status || ""), " ", when(r.completed_at))))));
}
