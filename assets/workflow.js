// Which workflow the dashboard shows. A daemon serving one workflow answers every route for
// it and nothing here changes a URL. A daemon serving several (GET /api/v1/workflows lists
// more than one) needs ?workflow=NAME on every API call and on the event stream; the chosen
// one lives in the page's address as ?workflow=NAME too, and no name there means "all".

/** The rows of GET /api/v1/workflows, as last read. */
let list = [];
/** The chosen workflow's name; null for "all", and always null with one workflow. */
let current = null;

export const PARAM = "workflow";

/** Keeps the rows of the last GET /api/v1/workflows. */
export function setList(rows) {
  list = Array.isArray(rows) ? rows : [];
}

export function rows() {
  return list;
}

/** More than one workflow: API calls name one. */
export function several() {
  return list.length > 1;
}

/** Takes the choice from a page address's query (ignored with one workflow). */
export function choose(search) {
  current = several() ? new URLSearchParams(search).get(PARAM) || null : null;
}

export function chosen() {
  return current;
}

/** The chosen workflow's row, if the list has it. */
export function row(name = current) {
  return list.find((w) => w.name === name) || null;
}

/** Several workflows and none chosen: the screens show every workflow instead of one. */
export function all() {
  return several() && !current;
}

/** Whether a change stream can be opened: one workflow, or a chosen one that is loaded. */
export function streamable() {
  if (!several()) return true;
  const r = row();
  return !!current && !(r && r.status === "not_loaded");
}

/** The query parameters every API call carries: {workflow: NAME} with several, else none. */
export function scope() {
  return several() && current ? { [PARAM]: current } : {};
}

/** A dashboard address (/ui/…) that keeps the chosen workflow, unless it names one itself. */
export function uiHref(href) {
  if (!several() || !href.startsWith("/ui/")) return href;
  const url = new URL(href, location.origin);
  return url.searchParams.has(PARAM) ? href : hrefFor(href, current);
}

/** A dashboard address (/ui/…) for workflow `name`; null drops the name ("all"). */
export function hrefFor(href, name) {
  if (!several() || !href.startsWith("/ui/")) return href;
  const url = new URL(href, location.origin);
  if (name) url.searchParams.set(PARAM, name);
  else url.searchParams.delete(PARAM);
  return url.pathname + url.search + url.hash;
}
