// The JSON API: GETs and the dashboard's POST actions. Errors come back as
// {"error":{"code","message"}}; callers get an Error whose message is the server's.

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

// "no-cache": the browser revalidates every read, so a state document that has not changed
// since the last read comes back as a 304 against the server's ETag instead of a full body.
export async function get(path, params) {
  const q = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v != null)) : null;
  const url = q && [...q].length ? `${path}?${q}` : path;
  const res = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-cache" });
  return parse(res);
}

export async function post(path) {
  const res = await fetch(path, { method: "POST", headers: { Accept: "application/json" } });
  return parse(res);
}

export const state = () => get("/api/v1/state");
export const issue = (identifier) => get(`/api/v1/${encodeURIComponent(identifier)}`);
export const runs = (params) => get("/api/v1/runs", params);
export const runsByIssue = (params) => get("/api/v1/runs/issues", params);
export const stats = (params) => get("/api/v1/stats", params);
export const runNow = (identifier) => post(`/api/v1/retries/${encodeURIComponent(identifier)}/run`);
export const checkReaction = (identifier, kind) =>
  post(`/api/v1/reactions/${encodeURIComponent(identifier)}/${encodeURIComponent(kind)}/check`);
export const acknowledge = (id) => post(`/api/v1/attention/${encodeURIComponent(id)}/acknowledge`);
export const refresh = () => post("/api/v1/refresh");
