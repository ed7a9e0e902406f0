// Node test of assets/reactions.js without a browser: a minimal DOM stand-in renders the rows
// of pending reactions, and the "Check now" button's click is followed to the request it
// sends. Prints "ok" and exits 0 when every check holds; throws otherwise.

import assert from "node:assert/strict";

class Node {}
class Text extends Node {
  constructor(t) { super(); this.text = t; }
  get textContent() { return this.text; }
}
class Element extends Node {
  constructor(tag) { super(); this.tag = tag; this.attrs = {}; this.dataset = {}; this.children = []; this.listeners = {}; }
  setAttribute(k, v) { this.attrs[k] = v; }
  addEventListener(k, f) { this.listeners[k] = f; }
  append(...c) { this.children.push(...c); }
  get textContent() { return this.children.map((c) => c.textContent).join(""); }
  set textContent(t) { this.children = [new Text(t)]; }
  find(pred) {
    if (pred(this)) return this;
    for (const c of this.children) {
      if (c instanceof Element) { const f = c.find(pred); if (f) return f; }
    }
    return null;
  }
}
globalThis.Node = Node;
globalThis.document = {
  createElement: (t) => new Element(t),
  createTextNode: (t) => new Text(t),
  getElementById: () => null,
};
const sent = [];
globalThis.fetch = async (url, opts) => {
  sent.push([opts && opts.method, url]);
  return { ok: true, text: async () => "{}" };
};

const dir = process.argv[2];
const r = await import(`${dir}/reactions.js`);

assert.equal(r.kindLabel("merge-conflict"), "Merge conflict");
assert.equal(r.kindLabel("future-kind"), "future-kind");
assert.equal(r.attempts(2, 2), "2 of 2");
assert.equal(r.attempts(1, null), "1");
assert.equal(r.attempts(null, null), null);
assert.equal(r.lastCheckSummary("ci", { status: "failing", failing_checks: ["Test", "Lint"], failing: 2 }), "failing: Test, Lint");
assert.equal(r.lastCheckSummary("ci", { status: "passing", failing_checks: [], failing: 0, pending: 1, passing: 4 }), "passing (4 passing, 1 pending)");
assert.equal(r.lastCheckSummary("review", { actionable_comments: 0, new_comments: 0, awaiting_approval: true }), "0 actionable, 0 new, awaiting approval");
assert.equal(r.lastCheckSummary("bot-review", { actionable_comments: 2, new_comments: 1, handled: true }), "2 actionable, 1 new, handled");
assert.equal(r.lastCheckSummary("merge-conflict", { mergeable: null }), "mergeability not computed yet");
assert.equal(r.lastCheckSummary("merge-conflict", { mergeable: true }), "no conflict");
assert.equal(r.lastCheckSummary("merge", null), null);

const row = {
  issue_id: "mno345", issue_identifier: "MT-653", kind: "ci", config_key: "ci_failure",
  pull_request: { number: 931, repository: "acme/web", url: "https://github.com/acme/web/pull/931" },
  next_poll_at: new Date(Date.now() + 90_000).toISOString(), wait: "poll_interval",
  used_attempts: 2, max_attempts: 2, escalated_at: new Date(Date.now() - 60_000).toISOString(),
  escalation_trigger: "budget_exhausted", watch_ends_at: null,
  last_check: { status: "failing", failing_checks: ["Test"], failing: 1, pending: 0, passing: 4 },
  status_text: "CI escalated on #931",
  status_text_full: "Sortie escalated failing CI on PR #931; it keeps watching the pull request. CI fixes used: 2 of 2.",
};
// The shared button: label, action, attributes.
const button = (label, action, attrs) => {
  const b = new Element("button");
  for (const [k, v] of Object.entries(attrs)) b.setAttribute(k, v);
  b.addEventListener("click", action);
  b.append(new Text(label));
  return b;
};
const li = r.reactionRow(row, button);
const text = li.textContent;
assert.equal(li.attrs.class, "escalated");
assert.equal(li.dataset.reaction, "MT-653/ci");
for (const part of ["MT-653", "CI", "acme/web#931", "escalated: budget exhausted", "CI fixes used: 2 of 2.",
  "wait poll interval", "tries 2 of 2", "last check failing: Test", "next check in 1m 30s", "Check now"]) {
  assert.ok(text.includes(part), `row text lacks ${JSON.stringify(part)}: ${text}`);
}
const link = li.find((e) => e.tag === "a" && e.attrs.href === "https://github.com/acme/web/pull/931");
assert.ok(link, "the pull request links to its page");
const btn = li.find((e) => e.tag === "button");
assert.equal(btn.attrs["data-kind"], "ci");
await btn.listeners.click();
assert.deepEqual(sent, [["POST", "/api/v1/reactions/MT-653/ci/check"]]);

// A row rebuilt after a restart: no link, no wait, no check yet; not escalated; an identifier
// that needs encoding is encoded in the path.
const rebuilt = r.reactionRow({
  issue_identifier: "owner/repo#9", kind: "label-fix", pull_request: { number: 9, repository: "owner/repo" },
  next_poll_at: null, used_attempts: null, max_attempts: null, escalated_at: null, last_check: null,
  status_text: "Watching #9 for the fix label", status_text_full: "Sortie watches PR #9 for the fix label; next check due now.",
}, button, { withIssue: false });
assert.equal(rebuilt.attrs.class, undefined);
assert.ok(!rebuilt.find((e) => e.tag === "a"), "no link without a url, and no issue link on the issue screen");
assert.ok(!rebuilt.textContent.includes("tries"), rebuilt.textContent);
assert.ok(rebuilt.textContent.includes("owner/repo#9"));
await rebuilt.find((e) => e.tag === "button").listeners.click();
assert.deepEqual(sent[1], ["POST", "/api/v1/reactions/owner%2Frepo%239/label-fix/check"]);
// The triage verdict a row carries: running, escalate, ignore (bot review handled).
assert.equal(r.triageSummary({ wait: "triage" }), "running");
assert.equal(r.triageSummary({ escalated_at: "2026-01-01T00:00:00Z", escalation_trigger: "triage" }), "escalate: asked for a person");
assert.equal(r.triageSummary({ escalated_at: "2026-01-01T00:00:00Z", escalation_trigger: "budget_exhausted" }), null);
assert.equal(r.triageSummary({ last_check: { handled: true } }), "ignore (handled)");
assert.equal(r.triageSummary({ wait: "poll_interval", last_check: null }), null);
const triaging = r.reactionRow({ ...row, escalated_at: null, escalation_trigger: undefined, wait: "triage" }, button);
assert.ok(triaging.textContent.includes("triage running"), triaging.textContent);
assert.ok(!li.textContent.includes("triage"), "no triage fact without one: " + li.textContent);
// What each reaction recorded in the issue's pass (`pr_loop`).
assert.equal(r.prLoopList({}), null);
assert.equal(r.prLoopList(null), null);
const loop = r.prLoopList({
  ci_failure: { result: "escalated", continuations: 2 },
  review_comments: { result: "acted", continuations: 1 },
  bot_review: { result: "quiet", continuations: 0 },
  auto_merge: { result: "unrecorded", continuations: 0 },
});
assert.equal(loop.children.length, 4);
assert.equal(loop.children[0].dataset.reaction, "ci_failure");
assert.equal(loop.children[0].dataset.result, "escalated");
assert.equal(loop.children[0].textContent, "CI failure escalated to a person, 2 runs scheduled");
assert.equal(loop.children[1].textContent, "Review comments acted, 1 run scheduled");
assert.equal(loop.children[2].textContent, "Bot review watched, nothing to act on");
assert.equal(loop.children[3].textContent, "Auto-merge nothing recorded");
console.log("ok");
