// The JSON API: GETs and the dashboard's POST actions. Errors come back as
// {"error":{"code","message"}}; callers get an Error whose message is the server's. Every
// call carries the chosen workflow (workflow.js: ?workflow=NAME when the daemon serves
// several) and gives up after REQUEST_TIMEOUT_MS.

import { scope } from "./workflow.js";

/** The longest a call waits for the server's answer, body included. */
const REQUEST_TIMEOUT_MS = 20000;

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

async function parse(res) {
  let body = null;
  const text = await res.text();
  if (text) {
    try { body = JSON.parse(text); } catch { body = null; }
  }
  if (!res.ok) {
    const e = body && body.error;
    throw new ApiError(res.status, e && e.code, (e && e.message) || `${res.status} ${res.statusText}`);
  }
  return body;
}

/** `path` with the chosen workflow and `params` (a null value drops a parameter). */
function address(path, params) {
  const all = { ...scope(), ...(params || {}) };
  const q = new URLSearchParams(Object.entries(all).filter(([, v]) => v !== "" && v != null));
  return [...q].length ? `${path}?${q}` : path;
}

/** fetch with the deadline; a call that outlives it fails with a sentence saying so. */
async function call(url, init) {
  const signal = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  try {
    const res = await fetch(url, { ...init, signal });
    return await parse(res);
  } catch (e) {
    if (e && e.name === "TimeoutError") {
      throw new ApiError(0, "timeout", `The server did not answer within ${REQUEST_TIMEOUT_MS / 1000} s.`);
    }
    throw e;
  }
}

// "no-cache": the browser revalidates every read, so a state document that has not changed
// since the last read comes back as a 304 against the server's ETag instead of a full body.
export function get(path, params) {
  return call(address(path, params), { headers: { Accept: "application/json" }, cache: "no-cache" });
}

export function post(path) {
  return call(address(path), { method: "POST", headers: { Accept: "application/json" } });
}

export const state = (params) => get("/api/v1/state", params);
/** The daemon's workflows: answered for the daemon, so it names none. */
export const workflows = () => get("/api/v1/workflows", { workflow: null });
export const issue = (identifier) => get(`/api/v1/${encodeURIComponent(identifier)}`);
export const runs = (params) => get("/api/v1/runs", params);
export const runsByIssue = (params) => get("/api/v1/runs/issues", params);
export const stats = (params) => get("/api/v1/stats", params);
export const runNow = (identifier) => post(`/api/v1/retries/${encodeURIComponent(identifier)}/run`);
export const checkReaction = (identifier, kind) =>
  post(`/api/v1/reactions/${encodeURIComponent(identifier)}/${encodeURIComponent(kind)}/check`);
export const acknowledge = (id) => post(`/api/v1/attention/${encodeURIComponent(id)}/acknowledge`);
export const refresh = () => post("/api/v1/refresh");
