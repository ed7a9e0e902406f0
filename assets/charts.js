// Charts of GET /api/v1/stats spend buckets, drawn as inline SVG: spend, tokens and runs by
// outcome per hour (the last 24 hours) or per UTC day (the last 30 days). The bars are SVG
// stretched to the panel's width; every label is HTML text, so it stays readable at phone
// width, and every colour is a CSS variable, so dark mode needs nothing here.

import { h, usd, compact, num } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const HOUR_MS = 3600000;
const DAY_MS = 86400000;

/** The two windows the Overview offers: their slots, and the period of their buckets. */
export const WINDOWS = {
  hours: { label: "Last 24 hours", period: "hour", slots: 24, step: HOUR_MS },
  days: { label: "Last 30 days", period: "day", slots: 30, step: DAY_MS },
};

/** The stats query of a window: from the start of its first slot, so totals match the bars. */
export function windowQuery(win, nowMs) {
  const first = Math.floor(nowMs / win.step) * win.step - (win.slots - 1) * win.step;
  return { since: new Date(first).toISOString(), period: win.period };
}

const OUTCOMES = [
  ["succeeded", "Succeeded"],
  ["failed", "Failed"],
  ["stopped", "Stopped"],
  ["cancelled", "Cancelled"],
];

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

/** One slot per hour or day of the window, oldest first, each with its bucket (or none). */
export function slots(report, win, nowMs) {
  const byStart = new Map();
  for (const b of (report && report.spend && report.spend.buckets) || []) {
    const t = Date.parse(b.start);
    if (!isNaN(t)) byStart.set(t, b);
  }
  const last = Math.floor(nowMs / win.step) * win.step;
  const out = [];
  for (let i = win.slots - 1; i >= 0; i--) {
    const start = last - i * win.step;
    out.push({ start, bucket: byStart.get(start) || null });
  }
  return out;
}

function slotLabel(ms, win) {
  const d = new Date(ms);
  return win.step === HOUR_MS
    ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleDateString([], { month: "short", day: "numeric", timeZone: "UTC" });
}

/**
 * Stacked bars: `series` is [[key, label]], `value(bucket, key)` the height of each part.
 * Returns null when every value is zero.
 */
function bars(list, win, series, value, format, name) {
  const totals = list.map((s) => series.reduce((n, [k]) => n + (s.bucket ? value(s.bucket, k) || 0 : 0), 0));
  const max = Math.max(0, ...totals);
  if (!(max > 0)) return null;
  const width = list.length * 10;
  const height = 100;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", class: "bars",
    role: "img", "aria-label": name });
  list.forEach((s, i) => {
    if (!s.bucket) return;
    let y = height;
    for (const [k, label] of series) {
      const v = value(s.bucket, k) || 0;
      if (v <= 0) continue;
      const hgt = Math.max(1, (v / max) * (height - 2));
      y -= hgt;
      const rect = svg("rect", { x: i * 10 + 1.5, y, width: 7, height: hgt, class: `bar ${k}` });
      const t = svg("title", {});
      t.textContent = `${slotLabel(s.start, win)}: ${series.length > 1 ? `${label} ` : ""}${format(v)}`;
      rect.append(t);
      chart.append(rect);
    }
  });
  const mid = list[Math.floor(list.length / 2)];
  return h("div", { class: "chart" },
    h("div", { class: "axis-y muted" }, format(max)),
    chart,
    h("div", { class: "axis-x muted" },
      h("span", {}, slotLabel(list[0].start, win)),
      h("span", {}, slotLabel(mid.start, win)),
      h("span", {}, slotLabel(list[list.length - 1].start, win))));
}

function legend(series) {
  return h("div", { class: "legend" }, series.map(([k, label]) =>
    h("span", {}, h("i", { class: `swatch ${k}` }), label)));
}

/** A titled chart with the window's total beside its title, or an empty sentence. */
function figure(id, title, total, chart, extra) {
  return h("figure", { class: "figure", id },
    h("figcaption", {}, h("b", {}, title), total ? h("span", { class: "muted" }, ` · ${total}`) : null),
    chart || h("p", { class: "empty" }, "Nothing in this window."),
    chart ? extra : null);
}

/** The three charts of a stats report over `win`, measured from `nowMs`. */
export function charts(report, win, nowMs) {
  const list = slots(report, win, nowMs);
  const summary = (report && report.summary) || {};
  const tokens = summary.tokens ? summary.tokens.total : null;
  const costText = summary.cost_usd != null ? `${summary.cost_lower_bound ? "≥ " : ""}${usd(summary.cost_usd)}` : null;
  const spendChart = bars(list, win, [["spend", "Spend"]], (b) => b.cost_usd, (v) => usd(v), `Spend per ${win.step === HOUR_MS ? "hour" : "day"}`);
  const tokenChart = bars(list, win, [["tokens", "Tokens"]], (b) => b.tokens && b.tokens.total, (v) => compact(v), "Tokens");
  const outcomeChart = bars(list, win, OUTCOMES, (b, k) => b[k], (v) => num(v), "Runs by outcome");
  return [
    figure("chart-spend", "Spend", costText && `${costText} estimated`, spendChart),
    figure("chart-tokens", "Tokens", tokens != null ? compact(tokens) : null, tokenChart),
    figure("chart-outcomes", "Runs by outcome", summary.runs ? `${num(summary.runs)} runs` : null, outcomeChart, legend(OUTCOMES)),
  ];
}
