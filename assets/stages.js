// Dispatch rules and stage chains, as GET /api/v1/state and GET /api/v1/runs serve them: a
// row's rule and where it stands on its chain ("implement · 2/3"), a run's stage and the hop
// it made, and the rows of issues between stages with the hold the latest pass gave them.
// The sentences come from the server; only the short facts are laid out here.

import { h, facts, issueLink, relative } from "./dom.js";

/** `implement · 2/3` for a row on a chain, the rule alone off a chain, null without a rule. */
export function stageText(row) {
  if (!row) return null;
  const p = row.stage_position;
  const rule = row.rule_name || (p && p.current);
  if (!rule) return null;
  if (!p || !Array.isArray(p.chain)) return rule;
  const i = p.chain.indexOf(p.current);
  return i < 0 ? rule : `${rule} · ${i + 1}/${p.chain.length}`;
}

/** A run's stage: its place on `stage_chain`, and the hop its exit decided (`→ review, advanced`). */
export function runStage(run) {
  if (!run) return null;
  const parts = [];
  const chain = run.stage_chain;
  if (Array.isArray(chain) && run.rule_name) {
    const i = chain.indexOf(run.rule_name);
    if (i >= 0) parts.push(`${i + 1}/${chain.length}`);
  }
  if (run.stage_target) parts.push(`→ ${run.stage_target}${run.stage_result ? `, ${run.stage_result}` : ""}`);
  return parts.length ? parts.join(" ") : null;
}

/** One between-stages row: the move, the hold's sentence when a pass holds the issue. */
export function betweenRow(r) {
  const hold = r.hold;
  return h("li", { class: hold ? "held" : null, dataset: { between: r.issue_identifier || "" } },
    h("div", { class: "row-head" },
      r.issue_identifier ? issueLink(r.issue_identifier) : null,
      h("span", { class: "title" }, r.issue_title || ""),
      h("b", {}, `${r.source_rule || "?"} → ${r.target_rule || "?"}`),
      hold ? h("span", { class: "sev warning" }, "held") : null),
    h("div", { title: r.status_text || "" }, r.status_text_full || r.status_text || ""),
    hold ? h("div", { class: "hold", dataset: { reason: hold.reason || "" } }, hold.reason_text || hold.reason || "") : null,
    hold && hold.release_text ? h("div", { class: "muted" }, hold.release_text) : null,
    facts([
      ["stage", stageText(r)],
      ["label", r.target_label],
      ["agent", r.agent_kind],
      ["model", r.configured_model],
      ["moved", relative(r.hopped_at)],
    ]));
}
