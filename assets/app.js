// The dashboard's entry point: history routing under /ui/, one change stream shared by every
// screen, coalesced refetches on `change`, and a slow re-render so relative times stay true.

import { ChangeStream } from "./stream.js";
import { h, clear, measureFrom } from "./dom.js";
import * as overview from "./overview.js";
import * as issue from "./issue.js";
import * as runs from "./runs.js";
import * as health from "./health.js";
import * as prices from "./prices.js";

const ROUTES = [
  [/^\/ui\/?$/, overview, "overview"],
  [/^\/ui\/issues\/([^/]+)\/?$/, issue, null],
  [/^\/ui\/runs\/?$/, runs, "runs"],
  [/^\/ui\/health\/?$/, health, "health"],
  [/^\/ui\/prices\/?$/, prices, "prices"],
];

const main = document.getElementById("main");
const live = document.getElementById("live");
const generated = document.getElementById("generated");

let screen = null;
let loading = false;
let again = false;

const stream = new ChangeStream({
  onChange: () => refetch(),
  onAgentEvent: (e) => screen && screen.onAgentEvent && screen.onAgentEvent(e),
  onRunEnded: () => refetch(),
  onStatus: (s) => {
    live.dataset.state = s;
    live.textContent = s === "live" ? "live" : s === "down" ? "reconnecting" : "connecting";
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
  navigate,
};

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
  const path = location.pathname;
  let found = null;
  for (const [re, mod, key] of ROUTES) {
    const m = path.match(re);
    if (m) { found = { mod, key, params: m.slice(1).map(decodeURIComponent) }; break; }
  }
  for (const a of document.querySelectorAll("nav a[data-screen]")) {
    if (found && a.dataset.screen === found.key) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.body.dataset.loaded = "false";
  // Each screen says which instant its relative times are measured from.
  measureFrom(null);
  if (!found) {
    screen = null;
    document.title = "Not found · sortie";
    ctx.render([h("h1", {}, "No such screen"), h("p", {}, h("a", { href: "/ui/", "data-nav": true }, "Back to the overview"))]);
    return;
  }
  document.title = `${found.params[0] || found.mod.title} · sortie`;
  screen = found.mod.create({ ...ctx, params: found.params });
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

stream.open();
route();
