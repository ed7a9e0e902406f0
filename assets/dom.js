// DOM and formatting helpers. Everything the API returns is inserted as text, never as HTML.

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

/** Link to an issue's screen. */
export function issueLink(identifier) {
  return h("a", { class: "id", href: `/ui/issues/${encodeURIComponent(identifier)}`, "data-nav": true }, identifier);
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

/** Seconds → "1h 2m", "3m 4s", "5s". */
export function duration(secs) {
  if (secs === null || secs === undefined || !isFinite(secs)) return "—";
  let s = Math.max(0, Math.round(secs));
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

export function parseTime(iso) {
  if (!iso) return null;
  const t = Date.parse(iso);
  return isNaN(t) ? null : t;
}

/** "in 3m 2s", "4m ago", "now". */
export function relative(iso, now = Date.now()) {
  const t = parseTime(iso);
  if (t === null) return null;
  const d = (t - now) / 1000;
  if (Math.abs(d) < 1) return "now";
  return d > 0 ? `in ${duration(d)}` : `${duration(-d)} ago`;
}

/** An ISO timestamp as a <time> with local text and a relative hint. */
export function when(iso) {
  const t = parseTime(iso);
  if (t === null) return null;
  return h("time", { datetime: iso, title: new Date(t).toLocaleString() }, relative(iso));
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}
