// Prices: the rates in force per agent kind and model, the layer each rate comes from, and the
// state of every price source, from GET /api/v1/prices.

import * as api from "./api.js";
import { h, panel, facts, relative } from "./dom.js";

export const title = "Prices";

export function create(ctx) {
  return {
    async refresh() {
      const p = await api.get("/api/v1/prices");
      ctx.setGenerated(p.generated_at);
      ctx.render(view(p));
    },
  };
}

const LAYER = {
  kind_entry: "token_rates (kind)",
  model_entry: "token_rates (model)",
  operator_table: "your table",
  fetched: "downloaded table",
  embedded: "embedded table",
};

/** The headline: which table prices, in words a person reads first. */
function inForce(p) {
  const t = p.table_in_force;
  if (!t) return "No price table is in force; only token_rates entries price runs.";
  const when = `prices as of ${t.as_of} (${t.age_days} d old)`;
  if (t.layer === "embedded") return `Embedded table in use: the price table built into sortie, ${when}.`;
  return `Table in force: ${LAYER[t.layer] || t.layer}, ${when}.`;
}

function view(p) {
  const tr = p.token_rates || {};
  const sources = [["Your table", p.operator, "source-your"], ["Downloaded table", p.fetched, "source-downloaded"],
    ["Embedded table", p.embedded, "source-built-in"]].filter(([, s]) => s);
  return [
    h("h1", {}, "Prices"),
    h("p", { id: "in-force" }, inForce(p)),
    h("p", { class: "muted" },
      `token_rates: ${tr.kind_entries || 0} kind, ${tr.model_entries || 0} model entries.`,
      " Costs are estimates from these rates, not provider billing data."),
    panel("Models", models(p.models || []), { id: "prices-models", count: (p.models || []).length,
      empty: "No run has spent tokens yet and the workflow names no model." }),
    h("div", { class: "grid2" }, sources.map(([name, s, id]) => source(name, s, id, p))),
  ];
}

function rate(c) {
  if (!c || c.per_mtok === null || c.per_mtok === undefined) return h("span", { class: "muted" }, "—");
  return h("span", { title: (LAYER[c.layer] || c.layer || "") + (c.from_input ? ", at the input rate" : "") },
    `$${c.per_mtok}`, c.from_input ? "*" : "");
}

function models(rows) {
  if (!rows.length) return null;
  return h("div", { class: "table-wrap" }, h("table", {},
    h("thead", {}, h("tr", {}, h("th", {}, "Agent"), h("th", {}, "Model"), h("th", {}, "Priced by"),
      h("th", { class: "num" }, "Input"), h("th", { class: "num" }, "Output"),
      h("th", { class: "num" }, "Cache read"), h("th", { class: "num" }, "Cache write"),
      h("th", {}, "Status"), h("th", { class: "opt num" }, "Runs"), h("th", { class: "opt" }, "Last used"))),
    h("tbody", {}, rows.map((r) => h("tr", { dataset: { model: r.model, kind: r.agent_kind } },
      h("td", {}, r.agent_kind),
      h("td", {}, r.model || h("span", { class: "muted" }, "(none reported)")),
      h("td", {}, r.layer ? (LAYER[r.layer] || r.layer) : h("span", { class: "muted" }, "nothing")),
      h("td", { class: "num" }, rate(r.input)),
      h("td", { class: "num" }, rate(r.output)),
      h("td", { class: "num" }, rate(r.cache_read)),
      h("td", { class: "num" }, rate(r.cache_write)),
      h("td", { class: `status ${r.cost_status}` }, r.cost_status),
      h("td", { class: "opt num" }, r.runs),
      h("td", { class: "opt" }, r.last_used_at ? relative(r.last_used_at) : "—"))))));
}

/** Why a source that prices nothing is not a problem, or what prices meanwhile. */
function note(s, p) {
  const embedded = p.embedded && p.embedded.in_force;
  if (s.deferred) return "Not downloaded: token_rates and the tables in force price every model the workflow names.";
  if (s.status === "failing" && embedded && !s.in_force) return "The embedded table prices meanwhile.";
  return null;
}

function source(name, s, id, p) {
  const why = note(s, p);
  return panel(name, h("div", {},
    h("div", { class: "row-head" }, h("span", { class: `status ${s.status}` }, s.deferred ? "not needed" : s.status),
      s.in_force ? h("b", {}, "in force") : h("span", { class: "muted" }, "not in force")),
    why ? h("p", { class: "muted", dataset: { note: "" } }, why) : null,
    s.error ? h("div", { class: "msg" }, s.error) : null,
    facts([["off by", s.off_by], ["file", s.file], ["address", s.address], ["version", s.version],
      ["as of", s.as_of], ["models", s.models], ["next try", relative(s.next_try_at)],
      ["failures", s.failures || null], ["failed", relative(s.failed_at)]])),
  { id });
}
