// DOM and formatting helpers. Everything the API returns is inserted as text, never as HTML.

import { uiHref } from "./workflow.js";

/** Builds an element: h("a", {href: "/x", class: "y"}, "text", childNode, [more]). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** A titled panel with either its rows or an empty-state sentence. */
export function panel(title, body, opts = {}) {
  const isEmpty = body === null || body === undefined || (Array.isArray(body) && body.length === 0);
  return h("section", { class: "panel", "aria-label": title, id: opts.id },
    h("h2", {}, title, opts.count !== undefined ? h("span", { class: "muted" }, ` (${opts.count})`) : null),
    isEmpty ? h("p", { class: "empty" }, opts.empty || "None.") : body);
}

/** A list of rows. */
export function rows(items, render) {
  if (!items || items.length === 0) return [];
  return h("ul", { class: "rows" }, items.map(render));
}

/** Label/value facts line; skips absent values. */
export function facts(pairs) {
  const parts = [];
  for (const [label, value] of pairs) {
    if (value === null || value === undefined || value === "") continue;
    parts.push(h("span", {}, `${label} `, h("b", {}, value)));
  }
  return parts.length ? h("div", { class: "facts" }, parts) : null;
}

/** Link to an issue's screen, in the chosen workflow. */
export function issueLink(identifier) {
  return h("a", { class: "id", href: uiHref(`/ui/issues/${encodeURIComponent(identifier)}`), "data-nav": true }, identifier);
}

const NUM = new Intl.NumberFormat();
export function num(n) {
  return n === null || n === undefined ? "—" : NUM.format(n);
}

/** 1234567 → "1.2M". */
export function compact(n) {
  if (n === null || n === undefined) return "—";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(1) + "B";
  if (a >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (n / 1e3).toFixed(1) + "K";
  return NUM.format(n);
}

export function tokens(t) {
  if (!t) return null;
  const total = t.total_tokens ?? ((t.input_tokens || 0) + (t.output_tokens || 0));
  const cached = t.cache_read_tokens ? ` (${compact(t.cache_read_tokens)} cached)` : "";
  return `${compact(total)}${cached}`;
}

/**
 * Seconds → "5s", "3m", "3m 4s", "1h", "1h 2m", "2d": whole seconds cut down, as the server's
 * sentences write a duration, so "due in 9s" stands beside "Retry 1 in 9s", never "in 10s".
 */
export function duration(secs) {
  if (secs === null || secs === undefined || !isFinite(secs)) return "—";
  const s = Math.max(0, Math.floor(secs));
  if (s < 60) return `${s}s`;
  if (s < 3600) return s % 60 ? `${Math.floor(s / 60)}m ${s % 60}s` : `${s / 60}m`;
  if (s < 86400) {
    const m = Math.floor((s % 3600) / 60);
    return m ? `${Math.floor(s / 3600)}h ${m}m` : `${Math.floor(s / 3600)}h`;
  }
  return `${Math.floor(s / 86400)}d`;
}

export function parseTime(iso) {
  if (!iso) return null;
  const t = Date.parse(iso);
  return isNaN(t) ? null : t;
}

// The instant relative times are measured from. A screen built from one state document sets
// it to the document's generated_at, so "due in 4s" beside the server's "Retry 1 in 4s" is
// measured from the same instant and the two never disagree; other screens use the clock.
let reference = null;

/** Measures relative times from `iso` (a document's generated_at), or the clock with null. */
export function measureFrom(iso) {
  reference = parseTime(iso);
}

/** The instant relative times are measured from now (see measureFrom). */
export function nowMs() {
  return reference ?? Date.now();
}

/**
 * "in 3m 2s", "4m ago", "now". Measured from a document's generated_at, whole seconds are cut
 * down and a future instant reads "in 0s" as the server's sentences word a due time, so the two
 * agree to the second; measured from the clock, seconds are rounded.
 */
export function relative(iso, now = nowMs()) {
  const t = parseTime(iso);
  if (t === null) return null;
  const ms = t - now;
  if (reference !== null) {
    if (ms > 0) return `in ${duration(Math.floor(ms / 1000))}`;
    return ms > -1000 ? "now" : `${duration(Math.floor(-ms / 1000))} ago`;
  }
  const d = ms / 1000;
  if (Math.abs(d) < 1) return "now";
  return d > 0 ? `in ${duration(Math.round(d))}` : `${duration(Math.round(-d))} ago`;
}

/** An ISO timestamp as a <time> with local text and a relative hint. */
export function when(iso) {
  const t = parseTime(iso);
  if (t === null) return null;
  return h("time", { datetime: iso, title: new Date(t).toLocaleString() }, relative(iso));
}

/** A US-dollar figure as the server's sentences write it: 4 decimals below a cent. */
export function usd(n) {
  if (n === null || n === undefined || !isFinite(n)) return null;
  return n > 0 && n < 0.01 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`;
}

/**
 * A cost with the seed's cost_status word beside it: "$0.02 estimated", "≥ $0.02 partial"
 * (a lower bound), "— unpriced" (no rate priced it), "— unmeasured" (no token figure).
 */
export function cost(amount, status) {
  const figure = usd(amount);
  const lower = status === "partial";
  return h("span", { class: "cost", dataset: { costStatus: status || "" }, title: lower ? "at least" : null },
    figure ? `${lower ? "≥ " : ""}${figure}` : "—",
    status ? h("span", { class: "cost-status" }, ` ${status}`) : null);
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}
