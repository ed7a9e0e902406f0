// Health & Workflow: the health block (database, preflight, workflow file, poll, SCM, SSH hosts,
// notification destinations) and the
// configuration in effect, both from GET /api/v1/state.

import * as api from "./api.js";
import { h, panel, facts, relative } from "./dom.js";

export const title = "Health & Workflow";

export function create(ctx) {
  return {
    async refresh() {
      const s = await api.state();
      ctx.setGenerated(s.generated_at);
      ctx.render(view(s, ctx));
    },
  };
}

function view(s, ctx) {
  const health = s.health || {};
  // A null member is a check that does not apply (scm while no reaction uses a provider);
  // ssh_hosts and notifications are lists, not checks.
  const checks = Object.entries(health).filter(([, c]) => c && !Array.isArray(c)).map(([name, c]) => check(name, c));
  const hosts = Array.isArray(health.ssh_hosts) ? health.ssh_hosts : [];
  const destinations = Array.isArray(health.notifications) ? health.notifications : [];
  const cfg = s.config || null;
  return [
    h("h1", {}, "Health & Workflow"),
    h("div", { class: "grid2" },
      panel("Health", checks.length ? h("ul", { class: "rows", id: "health-checks" }, checks) : null, { id: "health", empty: "No health data." }),
      panel("Daemon", h("dl", { class: "kv" },
        h("dt", {}, "Version"), h("dd", {}, s.version || "—"),
        h("dt", {}, "Started"), h("dd", {}, s.started_at ? relative(s.started_at) : "—"),
        h("dt", {}, "Snapshot"), h("dd", {}, s.generated_at || "—"),
        h("dt", {}, "Tracker"), h("dd", {}, (cfg && cfg.tracker && cfg.tracker.kind) || "—"),
        h("dt", {}, "Agent"), h("dd", {}, (cfg && cfg.agent && cfg.agent.kind) || "—")),
        { id: "daemon" },
        ),
    ),
    hosts.length ? panel("SSH hosts", h("ul", { class: "rows", id: "ssh-hosts" }, hosts.map(host)), { id: "hosts" }) : null,
    destinations.length ? panel("Notifications", h("ul", { class: "rows", id: "notification-destinations" }, destinations.map(destination)), { id: "notifications" }) : null,
    h("div", {}, h("button", { type: "button", class: "secondary", "data-action": "refresh",
      onclick: async (e) => { e.target.disabled = true; try { await api.refresh(); } finally { e.target.disabled = false; ctx.changed(); } } },
      "Poll now")),
    panel("Configuration in effect", cfg ? config(cfg) : null, { id: "config", empty: "The state document carries no configuration." }),
  ];
}

function check(name, c) {
  const st = c.status || (c.ok === true ? "pass" : c.ok === false ? "fail" : "");
  return h("li", { dataset: { check: name } },
    h("div", { class: "row-head" }, h("b", {}, name), h("span", { class: `status ${st}` }, st || "unknown"),
      c.file ? h("span", { class: "muted" }, c.file) : null,
      c.provider ? h("span", { class: "muted" }, c.provider) : null),
    c.summary_text ? h("div", {}, c.summary_text) : null,
    c.error ? h("div", { class: "msg" }, c.error) : null,
    facts([["checked", relative(c.checked_at)], ["last success", relative(c.last_success_at)],
      ["failing since", relative(c.failing_since)], ["failures in a row", c.consecutive_failures || null],
      ["next poll", relative(c.next_poll_at)], ["outcome", c.outcome]]));
}

function destination(d) {
  const st = d.status || "unknown";
  return h("li", { dataset: { destination: d.name } },
    h("div", { class: "row-head" }, h("b", {}, d.name), h("span", { class: `status ${st}` }, st),
      h("span", { class: "muted" }, d.kind)),
    d.last_error && st === "fail" ? h("div", { class: "msg" }, d.last_error) : null,
    facts([["last delivered", relative(d.last_success_at)], ["last error", relative(d.last_error_at)],
      ["failing since", relative(d.failing_since)], ["failures in a row", d.consecutive_failures || null],
      ["queued", String(d.queued ?? 0)]]));
}

function host(x) {
  const out = x.status === "out_of_service";
  return h("li", { dataset: { host: x.host } },
    h("div", { class: "row-head" }, h("b", {}, x.host),
      h("span", { class: `status ${out ? "fail" : "pass"}` }, out ? "out of service" : "in service")),
    facts([["sessions", String(x.running)], ["back in service", relative(x.out_of_service_until)]]));
}

/** The config as nested definition lists: readable on a phone, no JSON to squint at. */
function config(v, depth = 0) {
  if (v === null || v === undefined) return h("span", { class: "muted" }, "—");
  if (Array.isArray(v)) {
    if (v.every((x) => typeof x !== "object" || x === null)) return v.length ? v.join(", ") : h("span", { class: "muted" }, "none");
    return h("ol", {}, v.map((x) => h("li", {}, config(x, depth + 1))));
  }
  if (typeof v === "object") {
    const entries = Object.entries(v);
    if (!entries.length) return h("span", { class: "muted" }, "{}");
    return h("dl", { class: "kv" }, entries.map(([k, x]) => [h("dt", {}, k), h("dd", {}, config(x, depth + 1))]));
  }
  return String(v);
}
