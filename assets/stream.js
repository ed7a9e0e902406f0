// The change stream (GET /api/v1/events): refetch on `change`, live agent events for the runs a
// screen subscribes to (`run=<dispatch_id>:<seq>`), reconnect with backoff after an error, and
// treat 45 s without any frame (the server sends a heartbeat every 15 s) as a dead stream.
// The stream is the chosen workflow's (?workflow=NAME when the daemon serves several); with
// several and none chosen, or a chosen one that did not load, there is no stream to open and
// the screen reads on a timer instead (status "polling").

import { scope, streamable } from "./workflow.js";

const SILENCE_MS = 45000;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30000;

export class ChangeStream {
  /**
   * @param {object} handlers onChange(), onAgentEvent(event), onRunEnded(data), onStatus(state)
   *   where state is "connecting" | "live" | "down" | "polling".
   */
  constructor(handlers) {
    this.handlers = handlers;
    this.es = null;
    this.runs = new Map(); // dispatch_id -> last seq seen (0 = from the start)
    this.backoff = BACKOFF_MIN_MS;
    this.retryTimer = null;
    this.watchdog = null;
    this.deferred = false;
  }

  /** Subscribes to exactly these runs ({dispatch_id: seq}); reopens only if they changed. */
  setRuns(runs) {
    const next = new Map(Object.entries(runs || {}));
    const same = next.size === this.runs.size && [...next.keys()].every((k) => this.runs.has(k));
    if (same && this.es) return;
    for (const [k, v] of next) if (this.runs.has(k)) next.set(k, Math.max(v, this.runs.get(k)));
    this.runs = next;
    this.open();
  }

  url() {
    const q = new URLSearchParams(scope());
    for (const [id, seq] of this.runs) q.append("run", seq > 0 ? `${id}:${seq}` : id);
    const s = q.toString();
    return s ? `/api/v1/events?${s}` : "/api/v1/events";
  }

  open() {
    this.close();
    if (!streamable()) {
      this.status("polling");
      return;
    }
    this.status("connecting");
    // A stream opened while the page is still loading holds the load event open in some
    // browsers (the page never reads "complete"); open it once loading is over.
    if (document.readyState !== "complete") {
      if (!this.deferred) {
        this.deferred = true;
        window.addEventListener("load", () => { this.deferred = false; this.open(); }, { once: true });
      }
      return;
    }
    const es = new EventSource(this.url());
    this.es = es;
    const alive = () => {
      if (this.es !== es) return;
      this.backoff = BACKOFF_MIN_MS;
      this.status("live");
      this.arm();
    };
    es.addEventListener("open", alive);
    es.addEventListener("heartbeat", alive);
    es.addEventListener("change", () => { alive(); this.handlers.onChange?.(); });
    es.addEventListener("agent_event", (e) => {
      alive();
      const data = safeJson(e.data);
      if (!data) return;
      if (this.runs.has(data.dispatch_id) && typeof data.seq === "number") {
        this.runs.set(data.dispatch_id, Math.max(this.runs.get(data.dispatch_id), data.seq));
      }
      this.handlers.onAgentEvent?.(data);
    });
    es.addEventListener("run_ended", (e) => { alive(); this.handlers.onRunEnded?.(safeJson(e.data) || {}); });
    es.addEventListener("reset", (e) => {
      alive();
      // The cursor is gone: start the run from what the server still has and refetch.
      const data = safeJson(e.data) || {};
      if (data.dispatch_id && this.runs.has(data.dispatch_id)) this.runs.set(data.dispatch_id, 0);
      this.handlers.onChange?.();
    });
    es.addEventListener("error", () => this.fail());
    this.arm();
  }

  /** Watchdog: no frame for SILENCE_MS means the stream is dead even if the socket is open. */
  arm() {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => this.fail(), SILENCE_MS);
  }

  fail() {
    this.close();
    this.status("down");
    const wait = this.backoff;
    this.backoff = Math.min(this.backoff * 2, BACKOFF_MAX_MS);
    this.retryTimer = setTimeout(() => this.open(), wait);
  }

  close() {
    clearTimeout(this.watchdog);
    clearTimeout(this.retryTimer);
    if (this.es) this.es.close();
    this.es = null;
  }

  status(s) {
    this.handlers.onStatus?.(s);
  }
}

function safeJson(text) {
  try { return JSON.parse(text); } catch { return null; }
}
