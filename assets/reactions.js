// Pending pull-request reactions, as GET /api/v1/state and GET /api/v1/{identifier} serve
// them: one row per issue and kind, with its pull request, wait, tries, next check and what the
// last check found, and a "Check now" action. A standing escalation is highlighted with its
// trigger. The sentences come from the server; only the short facts are laid out here.

import * as api from "./api.js";
import { h, facts, issueLink, relative } from "./dom.js";

const KIND_LABELS = {
  ci: "CI",
  review: "Review comments",
  "bot-review": "Bot review",
  merge: "Auto-merge",
  "merge-conflict": "Merge conflict",
  "merge-completion": "Merge completion",
  "label-review": "Review label",
  "label-fix": "Fix label",
};

/** The kind in words; an unknown kind reads as sent. */
export function kindLabel(kind) {
  return KIND_LABELS[kind] || kind || "";
}

/** `2 of 3`, `2` without a budget, or null when the kind counts nothing. */
export function attempts(used, max) {
  if (used == null) return null;
  return max == null ? String(used) : `${used} of ${max}`;
}

/** One line for what the latest check found; null before the first check. */
export function lastCheckSummary(kind, c) {
  if (!c) return null;
  if (kind === "ci") {
    const failing = (c.failing_checks || []).join(", ");
    if (c.status === "failing") return failing ? `failing: ${failing}` : `${c.failing} failing`;
    return `${c.status} (${c.passing} passing, ${c.pending} pending)`;
  }
  if (kind === "review" || kind === "bot-review") {
    const parts = [`${c.actionable_comments} actionable`, `${c.new_comments} new`];
    if (c.awaiting_approval) parts.push("awaiting approval");
    if (c.handled) parts.push("handled");
    return parts.join(", ");
  }
  if (kind === "merge-conflict") {
    return c.mergeable === true ? "no conflict" : c.mergeable === false ? "conflicts" : "mergeability not computed yet";
  }
  return null;
}

/**
 * What the row shows of its triage command: running while the row waits on it, "escalate"
 * when its verdict began the standing escalation, "ignore (handled)" while bot review's
 * answered comment set stands; null otherwise (an `act` verdict shows as the fix run it
 * dispatched, in the runs).
 */
export function triageSummary(r) {
  if (r.wait === "triage") return "running";
  if (r.escalated_at && r.escalation_trigger === "triage") return "escalate: asked for a person";
  if (r.last_check && r.last_check.handled) return "ignore (handled)";
  return null;
}

/** The pull request as a link when the server has read its page, else `owner/repo#n`. */
export function pullRequestLink(pr) {
  if (!pr) return null;
  const text = `${pr.repository}#${pr.number}`;
  return pr.url ? h("a", { href: pr.url, rel: "noopener noreferrer", target: "_blank" }, text) : h("span", {}, text);
}

/**
 * One pending reaction row. `button(label, action, attrs)` builds an action button (the
 * dashboard's shared one, which shows the outcome and refetches).
 */
export function reactionRow(r, button, { withIssue = true } = {}) {
  const escalated = !!r.escalated_at;
  const check = () => api.checkReaction(r.issue_identifier, r.kind);
  return h("li", { class: escalated ? "escalated" : null, dataset: { reaction: `${r.issue_identifier || ""}/${r.kind || ""}` } },
    h("div", { class: "row-head" },
      withIssue && r.issue_identifier ? issueLink(r.issue_identifier) : null,
      h("b", {}, kindLabel(r.kind)),
      pullRequestLink(r.pull_request),
      escalated ? h("span", { class: "sev warning" }, "escalated", r.escalation_trigger ? `: ${r.escalation_trigger.replace(/_/g, " ")}` : "") : null),
    h("div", { title: r.status_text || "" }, r.status_text_full || r.status_text || ""),
    facts([
      ["wait", r.wait ? r.wait.replace(/_/g, " ") : null],
      ["tries", attempts(r.used_attempts, r.max_attempts)],
      ["next check", relative(r.next_poll_at)],
      ["last check", lastCheckSummary(r.kind, r.last_check)],
      ["triage", triageSummary(r)],
      ["escalated", escalated ? relative(r.escalated_at) : null],
      ["watch ends", relative(r.watch_ends_at)],
    ]),
    h("div", {}, button("Check now", check, { "data-action": "check-now", "data-identifier": r.issue_identifier, "data-kind": r.kind })));
}

const PR_LOOP_LABELS = {
  ci_failure: "CI failure",
  review_comments: "Review comments",
  bot_review: "Bot review",
  merge_conflicts: "Merge conflicts",
  auto_merge: "Auto-merge",
  merge_completion: "Merge completion",
  label_commands: "Label commands",
};

const PR_LOOP_WORDS = {
  escalated: "escalated to a person",
  acted: "acted",
  quiet: "watched, nothing to act on",
  unrecorded: "nothing recorded",
};

/** One line per configured reaction of a pass's `pr_loop`: what it recorded and the runs it
 * scheduled; null when no reaction is configured or the activity could not be read. */
export function prLoopList(loop) {
  const keys = loop ? Object.keys(loop) : [];
  if (!keys.length) return null;
  return h("ul", { class: "rows" }, keys.map((k) => {
    const m = loop[k] || {};
    const n = m.continuations || 0;
    const runs = n ? `, ${n} run${n === 1 ? "" : "s"} scheduled` : "";
    return h("li", { dataset: { reaction: k, result: m.result || "" } },
      h("b", {}, PR_LOOP_LABELS[k] || k), " ",
      h("span", { class: `status ${m.result || ""}` }, `${PR_LOOP_WORDS[m.result] || m.result || ""}${runs}`));
  }));
}
