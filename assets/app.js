// The dashboard's entry point: history routing under /ui/, one change stream shared by every
// screen, coalesced refetches on `change`, and a slow re-render so relative times stay true.
// When the daemon serves several workflows (GET /api/v1/workflows, read first), the header
// gets a switcher, the chosen workflow rides in the address (?workflow=NAME, kept by every
// link and navigation), and without one the screens show every workflow (workflows.js).

import * as api from "./api.js";
import * as wf from "./workflow.js";
import { ChangeStream } from "./stream.js";
import { h, clear, measureFrom } from "./dom.js";
import * as overview from "./overview.js";
import * as issue from "./issue.js";
import * as runs from "./runs.js";
import * as health from "./health.js";
import * as prices from "./prices.js";
import * as workflows from "./workflows.js";

const ROUTES = [
  [/^\/ui\/?$/, overview, "overview"],
  [/^\/ui\/issues\/([^/]+)\/?$/, issue, null],
  [/^\/ui\/runs\/?$/, runs, "runs"],
  [/^\/ui\/health\/?$/, health, "health"],
  [/^\/ui\/prices\/?$/, prices, "prices"],
];

/** How often the workflow list (names and health) is read again while there are several. */
const WORKFLOWS_EVERY_MS = 15000;

const main = document.getElementById("main");
const live = document.getElementById("live");
const generated = document.getElementById("generated");

let screen = null;
let loading = false;
let again = false;
/** The route key of the screen shown (null for an issue page or no screen). */
let shownKey = null;

const stream = new ChangeStream({
  onChange: () => refetch(),
  onAgentEvent: (e) => screen && screen.onAgentEvent && screen.onAgentEvent(e),
  onRunEnded: () => refetch(),
  onStatus: (s) => {
    live.dataset.state = s;
    live.textContent = s === "live" ? "live" : s === "down" ? "reconnecting" : s === "polling" ? "polling" : "connecting";
  },
});

const ctx = {
  stream,
  render(nodes) {
    clear(main);
    for (const n of [nodes].flat(Infinity)) if (n) main.append(n);
  },
  setGenerated(iso) {
    generated.textContent = iso ? `· state at ${new Date(iso).toLocaleTimeString()}` : "";
  },
  changed: () => refetch(),
  /** A screen's own navigation keeps the chosen workflow. */
  navigate: (url, opts) => navigate(wf.uiHref(url), opts),
  setWorkflows,
};

/** Which screen module route() picks depends on this; a change in it routes again. */
function mode() {
  const r = wf.row();
  return `${wf.several()}|${!!(r && r.status === "not_loaded")}`;
}

/** Takes a new workflow list: the switcher follows it, and the screen if the mode changed. */
function setWorkflows(rows) {
  const was = mode();
  wf.setList(rows);
  renderSwitcher();
  if (screen && mode() !== was) setTimeout(route, 0);
}

/** Reads the workflow list; a failed read keeps what the page knew (one workflow at first). */
async function loadWorkflows() {
  try {
    setWorkflows((await api.workflows()).workflows);
  } catch {
    // An older daemon without the route, or a read that failed: nothing to switch between.
  }
}

let switcherKey = null;

/** The header's switcher: absent with one workflow, rebuilt only when what it shows changes. */
function renderSwitcher() {
  const old = document.getElementById("workflow-switcher");
  if (!wf.several()) {
    if (old) old.remove();
    switcherKey = null;
    return;
  }
  const key = JSON.stringify([wf.rows().map((w) => [w.name, w.status]), wf.chosen()]);
  if (old && key === switcherKey) return;
  switcherKey = key;
  const el = workflows.switcher(wf.rows(), wf.chosen(), chooseWorkflow);
  if (old) old.replaceWith(el);
  else live.before(el);
}

/** A workflow's overview, or the same top-level screen for it; null is every workflow. */
function chooseWorkflow(name) {
  const path = name && shownKey ? location.pathname : "/ui/";
  navigate(wf.hrefFor(path, name));
}

/** The change stream's scope: reopened when it changes. */
function streamScope() {
  return wf.streamable() ? JSON.stringify(wf.scope()) : "none";
}

/** Runs the screen's refresh; a change that arrives meanwhile schedules exactly one more. */
async function refetch() {
  if (!screen) return;
  if (loading) { again = true; return; }
  loading = true;
  const current = screen;
  try {
    await current.refresh();
    document.body.dataset.loaded = "true";
  } catch (e) {
    if (current === screen) {
      ctx.render([h("h1", {}, "Cannot load"), h("div", { class: "banner error", role: "alert" }, e.message || String(e))]);
    }
  } finally {
    loading = false;
    if (again) { again = false; refetch(); }
  }
}

function route() {
  if (screen && screen.unmount) screen.unmount();
  const scopeBefore = streamScope();
  wf.choose(location.search);
  renderSwitcher();
  const path = location.pathname;
  let found = null;
  for (const [re, mod, key] of ROUTES) {
    const m = path.match(re);
    if (m) { found = { mod, key, params: m.slice(1).map(decodeURIComponent) }; break; }
  }
  for (const a of document.querySelectorAll("header a[data-nav]")) {
    a.dataset.base = a.dataset.base || a.getAttribute("href");
    a.setAttribute("href", wf.uiHref(a.dataset.base));
  }
  for (const a of document.querySelectorAll("nav a[data-screen]")) {
    if (found && a.dataset.screen === found.key) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.body.dataset.loaded = "false";
  // Each screen says which instant its relative times are measured from.
  measureFrom(null);
  shownKey = found ? found.key : null;
  if (!found) {
    screen = null;
    document.title = "Not found · sortie";
    ctx.render([h("h1", {}, "No such screen"), h("p", {}, h("a", { href: wf.uiHref("/ui/"), "data-nav": true }, "Back to the overview"))]);
    return;
  }
  // With several workflows and none chosen every screen shows them all; a chosen one that
  // did not load has nothing to read but its problem.
  let mod = found.mod;
  if (wf.all()) mod = workflows;
  else if (wf.several() && !wf.streamable()) mod = workflows.notLoaded;
  const named = wf.chosen() ? ` · ${wf.chosen()}` : "";
  document.title = `${(mod === found.mod && found.params[0]) || mod.title}${named} · sortie`;
  screen = mod.create({ ...ctx, params: found.params, target: found.key === "overview" ? "/ui/" : path, workflow: wf.chosen() });
  if (streamScope() !== scopeBefore) stream.open();
  if (!screen.onAgentEvent) stream.setRuns({});
  else if (!stream.es) stream.open();
  ctx.render(h("p", { class: "muted" }, "Loading…"));
  refetch();
}

function navigate(url, opts = {}) {
  if (opts.replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route();
  main.focus({ preventScroll: true });
  window.scrollTo(0, 0);
}

document.addEventListener("click", (e) => {
  const a = e.target.closest && e.target.closest("a[href]");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/ui/") || a.target) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", route);

// Relative times ("in 3m") age without data changes; re-render from the cached data.
setInterval(() => { if (screen && screen.tick && !loading) screen.tick(); }, 10000);

// A page left for another keeps its stream open while the browser holds it for "back"; a
// browser allows six connections to a host, so streams of left pages would starve the next
// page's requests. Close the stream when the page is hidden, open it again when it returns.
window.addEventListener("pagehide", () => stream.close());
window.addEventListener("pageshow", (e) => { if (e.persisted) { stream.open(); refetch(); } });

// The workflow list decides what every address means, so it is read before the first screen.
loadWorkflows().finally(() => {
  stream.open();
  route();
});
setInterval(() => { if (wf.several()) loadWorkflows(); }, WORKFLOWS_EVERY_MS);
