#!/usr/bin/env python3
"""Checks that the dashboard's pages agree with the API, in headless Chromium.

Run by tests/browser_issue_pages.rs against a daemon it started; uses the DevTools driver of
dashboard.py. Two scenes:

  --scene lists   issues in every list the state document has (running, retrying, budget-held,
                  parked, held by a blocker, held by a failed login, finished): every issue
                  linked from the Overview opens a page without an error, and each page shows
                  what the API says (the hold and what releases it, the critical item, the
                  moved state, costs with their cost_status word); a retry row's sentence and
                  its due time agree.
  --scene login   a session that failed to log in: the issues it holds answer with the hold,
                  what releases it and the critical item.
  --scene idle    a backlog that finishes: the Overview ends with the summary of what was
                  done and what it cost (the cost the stats route reports), the charts draw
                  the stats buckets, the Prices screen says the embedded table is in use.

Screenshots (phone and desktop width, light and dark) go to --out. Exits non-zero with a
message on the first failed expectation, and when a page load stalled (no Chromium restart is
tolerated: a stalled load is a page a person would see hang).

    issue_pages.py --scene lists|login|idle --base http://127.0.0.1:PORT --out DIR [--chromium PATH]
"""

import argparse
import json
import os
import re
import shutil
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dashboard import Browser, Failure, api  # noqa: E402

WAIT_S = 90

LOADED = "document.body.dataset.loaded === 'true'"
ERROR_PAGE = ("(() => { const h = document.querySelector('main h1'); const t = h ? h.textContent : '';"
              " return t === 'Cannot load' || t === 'No such screen' || !!document.querySelector('#not-found'); })()")


def text(b, selector):
    return b.eval(f"(document.querySelector({json.dumps(selector)})?.textContent || '')")


def has(b, selector, needle):
    return needle in text(b, selector)


def shoot(b, out, name, url, ready):
    """The page at url in four looks: desktop and phone width, light and dark."""
    for scheme in ("light", "dark"):
        for width, height, mobile, tag in ((1280, 1000, False, "desktop"), (390, 844, True, "phone")):
            b.call("Emulation.setDeviceMetricsOverride",
                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
            b.call("Emulation.setEmulatedMedia",
                   {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
            b.goto(url)
            b.wait(f"{name} to load", LOADED)
            b.wait(f"{name} to be ready", ready)
            if mobile and b.eval("document.documentElement.scrollWidth > window.innerWidth + 1"):
                raise Failure(f"{name} scrolls sideways at phone width")
            b.screenshot(os.path.join(out, f"{name}-{tag}-{scheme}.png"))
    b.call("Emulation.setDeviceMetricsOverride",
           {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    b.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})


def ids(rows):
    return {r["issue_identifier"] for r in rows or []}


def wait_lists(base):
    """The state document with every list the scene fills."""
    deadline = time.time() + WAIT_S
    seen_retry = False
    while time.time() < deadline:
        st = api(base, "/api/v1/state")
        seen_retry = seen_retry or bool(st.get("retrying"))
        held = {r["issue_identifier"]: r["hold"]["reason"] for r in st.get("held", [])}
        if ("L-1" in ids(st.get("running")) and "L-2" in ids(st.get("budget_exhausted"))
                and "L-6" in ids(st.get("parked")) and held.get("L-4") == "blocked_by"):
            return st
        time.sleep(0.2)
    raise Failure(f"the lists never filled: {json.dumps(st)[:1500]}")


def check_retry_row(b, base):
    """While L-2 waits for its retry, its sentence and its due time name the same wait."""
    deadline = time.time() + WAIT_S
    while time.time() < deadline:
        row = "#retrying li[data-retry='L-2']"
        # One read of the row, so its sentence and its facts come from the same render.
        got = b.eval(f"""(() => {{
            const li = document.querySelector({json.dumps(row)});
            if (!li) return null;
            const spans = [...li.querySelectorAll('.facts span')];
            return [li.querySelector(':scope > div[title]')?.textContent || '',
                    spans.find(s => s.textContent.startsWith('due '))?.querySelector('b')?.textContent || '',
                    spans.map(s => s.textContent).join(' | ')];
        }})()""")
        if got:
            sentence, due, attempt = got
            m = re.search(r"Retry \d+ (due now|in ([0-9dhms ]+?))(?: after|:|\.|$)", sentence)
            if due and m:
                want = "now" if m.group(1) == "due now" else f"in {m.group(2)}"
                if due != want:
                    raise Failure(f"the retry row says {sentence!r} beside due {due!r}")
                n = re.search(r"retry (\d+) \| next attempt (\d+)", attempt)
                said = re.search(r"Retry (\d+)", sentence)
                if not n or int(n.group(2)) != int(n.group(1)) + 1 or not said or said.group(1) != n.group(1):
                    raise Failure(f"the retry row's numbers: {attempt!r} beside {sentence!r}")
                print(f"retry row agrees: {sentence!r} / due {due!r} / {attempt!r}")
                return
        if "L-2" in ids(api(base, "/api/v1/state").get("budget_exhausted")):
            raise Failure("L-2 reached its session budget before its retry row was seen")
        time.sleep(0.1)
    raise Failure("no retry row for L-2 appeared")


def open_every_issue(b, base, at_least=5):
    """Every issue the Overview links to opens a page that answers for it."""
    b.goto(base + "/ui/")
    b.wait("the overview", LOADED)
    b.wait("the cost table", "!!document.querySelector('#issue-costs-table')")
    links = b.eval("[...new Set([...document.querySelectorAll('main a[href^=\"/ui/issues/\"]')]"
                   ".map(a => a.getAttribute('href')))]")
    if len(links) < at_least:
        raise Failure(f"the overview links too few issues: {links}")
    for href in links:
        b.goto(base + href)
        b.wait(f"{href} to load", LOADED)
        if b.eval(ERROR_PAGE):
            page = b.eval("document.querySelector('main').innerText")
            raise Failure(f"{href} opens an error page: {page[:600]}")
        if not b.eval("!!document.querySelector('#status p')"):
            raise Failure(f"{href} has no status")
        print(f"opened {href}: {text(b, '#status p')!r}")
    return [urllib.parse.unquote(h.rsplit("/", 1)[1]) for h in links]


def scene_lists(b, base, out):
    b.goto(base + "/ui/")
    b.wait("the overview", LOADED)
    check_retry_row(b, base)
    st = wait_lists(base)
    print("lists: " + json.dumps({k: sorted(ids(st.get(k))) for k in
                                  ("running", "retrying", "budget_exhausted", "parked", "held")}))

    # The running row shows the state sortie moved the issue to, with its cost.
    b.goto(base + "/ui/")
    b.wait("the overview", LOADED)
    b.wait("the running row in its moved state",
           "document.querySelector(\"#running li[data-running='L-1'] .row-head\")?.textContent.includes('In Progress')")
    b.wait("the running row's cost", "!!document.querySelector(\"#running li[data-running='L-1'] .cost[data-cost-status='estimated']\")")
    b.wait("the held row", "!!document.querySelector(\"#held li[data-held='L-4']\")")
    b.wait("the charts", "document.querySelectorAll('#activity svg.bars rect').length > 0")

    opened = open_every_issue(b, base)
    for must in ("L-1", "L-2", "L-3", "L-4", "L-6"):
        if must not in opened:
            raise Failure(f"the overview does not link {must}: {opened}")

    # Held by a blocker: no 404, the hold and what releases it.
    b.goto(base + "/ui/issues/L-4")
    b.wait("L-4's hold", "document.querySelector('#hold')?.dataset.reason === 'blocked_by'")
    if not has(b, "#hold", "Released when the blocker reaches a terminal state."):
        raise Failure(f"L-4's hold: {text(b, '#hold')!r}")
    if not has(b, "#status p", "Blocked by L-9"):
        raise Failure(f"L-4's status: {text(b, '#status p')!r}")
    if has(b, "#next", "Nothing is scheduled"):
        raise Failure("L-4 says nothing is scheduled")

    # An issue in no list: the page says so plainly, and it is not an error page either.
    b.goto(base + "/ui/issues/L-9")
    b.wait("L-9's page", LOADED)
    if not b.eval("!!document.querySelector('#not-found')"):
        raise Failure(f"L-9 is in no list and has no run, yet: {text(b, 'main')[:300]!r}")

    # A running issue: the moved state and its live cost.
    b.goto(base + "/ui/issues/L-1")
    b.wait("L-1's moved state", "document.querySelector('#status .facts')?.textContent.includes('In Progress')")
    b.wait("L-1's session cost", "!!document.querySelector('#session .cost')")
    # A budget-held issue and a parked one answer from their rows.
    for ident, status in (("L-2", "budget_exhausted"), ("L-6", "parked")):
        b.goto(f"{base}/ui/issues/{ident}")
        b.wait(f"{ident}'s status", f"document.querySelector('#status p')?.dataset.status === {json.dumps(status)}")
    # A finished issue: its runs' costs with their cost_status words, and its total.
    b.goto(base + "/ui/issues/L-3")
    b.wait("L-3's run costs", "document.querySelectorAll('#history td.cost .cost[data-cost-status=estimated]').length > 0")
    b.wait("L-3's total", "document.querySelector('#issue-cost')?.textContent.includes('estimated')")
    # The run history's attempts are the words the retry row used: L-2's second run is attempt 2.
    b.goto(base + "/ui/issues/L-2")
    b.wait("L-2's attempts", "[...document.querySelectorAll('#history tbody tr td:first-child')].map(t => t.textContent).join(',').includes('2')")

    # Runs: a cost for every run.
    b.goto(base + "/ui/runs")
    b.wait("the runs table's costs", "document.querySelectorAll('#runs-table td.cost .cost').length > 0 && "
           "document.querySelectorAll('#runs-table td.cost .cost').length === document.querySelectorAll('#runs-table tbody tr').length")

    shoot(b, out, "lists-overview", base + "/ui/", "!!document.querySelector('#activity svg.bars')")
    shoot(b, out, "lists-issue-blocked", base + "/ui/issues/L-4", "!!document.querySelector('#hold')")
    shoot(b, out, "lists-issue-finished", base + "/ui/issues/L-3", "!!document.querySelector('#history td.cost')")
    shoot(b, out, "lists-runs", base + "/ui/runs", "!!document.querySelector('#runs-table td.cost')")


def scene_login(b, base, out):
    """A-1's session failed to log in: A-1 and A-2 (never run) are held for it."""
    deadline = time.time() + WAIT_S
    while True:
        st = api(base, "/api/v1/state")
        held = {r["issue_identifier"]: r["hold"]["reason"] for r in st.get("held", [])}
        kinds = {a["kind"] for a in st.get("attention", [])}
        if held.get("A-1") == held.get("A-2") == "agent_auth_failed" and "agent_auth_failed" in kinds:
            break
        if time.time() > deadline:
            raise Failure(f"the login hold never showed: {json.dumps(st)[:1500]}")
        time.sleep(0.2)
    opened = open_every_issue(b, base, at_least=2)
    for must in ("A-1", "A-2"):
        if must not in opened:
            raise Failure(f"the overview does not link {must}: {opened}")
    # The hold, what releases it and the critical item, never the history sentence of an
    # issue with no ending nor "nothing is scheduled".
    for ident in ("A-1", "A-2"):
        b.goto(f"{base}/ui/issues/{ident}")
        b.wait(f"{ident}'s hold", "document.querySelector('#hold')?.dataset.reason === 'agent_auth_failed'")
        b.wait(f"{ident}'s critical item", "!!document.querySelector('#attention li .sev.critical')")
        page = b.eval("document.querySelector('main').innerText")
        for bad in ("Not active; no ending recorded", "Nothing is scheduled"):
            if bad in page:
                raise Failure(f"{ident}'s page says {bad!r}:\n{page[:800]}")
        for good in ("claude-code is not logged in", "Released when the workflow file is saved"):
            if good not in page:
                raise Failure(f"{ident}'s page lacks {good!r}:\n{page[:800]}")
        if not b.eval("!!document.querySelector('#attention [data-action=acknowledge]')"):
            raise Failure(f"{ident}'s critical item offers no Acknowledge")
    shoot(b, out, "login-issue-held", base + "/ui/issues/A-1", "!!document.querySelector('#hold')")


def scene_idle(b, base, out):
    b.goto(base + "/ui/")
    b.wait("the overview", LOADED)
    b.wait("the summary", "!!document.querySelector('#summary')", timeout=WAIT_S)
    st = api(base, "/api/v1/state")
    if st.get("running") or st.get("retrying"):
        raise Failure("the summary shows while sessions run or retries wait")
    since = urllib.parse.quote(st["started_at"])
    stats = api(base, f"/api/v1/stats?since={since}")
    sm = stats["summary"]
    cost = sm["cost_usd"]
    want = f"${cost:.4f}" if 0 < cost < 0.01 else f"${cost:.2f}"
    b.wait("the summary's cost", f"document.querySelector('#summary-cost')?.textContent === {json.dumps(want)}")
    summary = text(b, "#summary")
    for needle in (f"{sm['runs']} runs on {sm['issues']} issues", "Still waiting", "I-4"):
        if needle not in summary:
            raise Failure(f"the summary lacks {needle!r}: {summary!r}")
    for ident in ("I-1", "I-2", "I-3"):
        if not b.eval(f"!!document.querySelector(\"#summary li[data-summary='{ident}'] .cost\")"):
            raise Failure(f"the summary does not list {ident} with its cost: {summary!r}")
    print(f"summary: {summary!r}")

    # The charts draw the stats buckets: one bar per bucket with spend, tokens and outcomes.
    b.wait("the spend bars", "document.querySelectorAll('#chart-spend rect.bar.spend').length > 0")
    b.wait("the token bars", "document.querySelectorAll('#chart-tokens rect.bar.tokens').length > 0")
    b.wait("the outcome bars", "document.querySelectorAll('#chart-outcomes rect.bar.succeeded').length > 0")
    b.eval("document.querySelector('[data-window=days]').click(), true")
    b.wait("the 30-day window", "document.querySelector('[data-window=days]')?.getAttribute('aria-pressed') === 'true' && "
           "document.querySelectorAll('#chart-spend rect.bar.spend').length > 0")
    b.eval("document.querySelector('[data-window=hours]').click(), true")
    b.wait("the 24-hour window", "document.querySelector('[data-window=hours]')?.getAttribute('aria-pressed') === 'true'")

    # Prices: the embedded table prices, and nothing was downloaded.
    b.goto(base + "/ui/prices")
    b.wait("the prices", LOADED)
    b.wait("the embedded table in use", "document.querySelector('#in-force')?.textContent.startsWith('Embedded table in use')")
    b.wait("the download not needed", "document.querySelector('#source-downloaded')?.textContent.includes('not needed')")
    if b.eval("document.querySelector('main').innerText").find("failing") >= 0:
        raise Failure("the Prices screen says failing")

    shoot(b, out, "idle-overview", base + "/ui/", "!!document.querySelector('#summary')")
    shoot(b, out, "idle-prices", base + "/ui/prices", "!!document.querySelector('#in-force')")


def run(args):
    base = args.base.rstrip("/")
    os.makedirs(args.out, exist_ok=True)
    b = Browser(args.chromium)
    try:
        b.attach()
        b.emulate("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        {"lists": scene_lists, "login": scene_login, "idle": scene_idle}[args.scene](b, base, args.out)
        errs = b.errors()
        if errs:
            raise Failure("console errors: " + "; ".join(errs[:5]))
        if b.restarts:
            raise Failure(f"page loads stalled {b.restarts} times")
    except Failure as e:
        try:
            b.screenshot(os.path.join(args.out, f"failure-{args.scene}.png"))
            page = b.eval("document.body.innerText.slice(0, 1500)")
            raise Failure(f"{e}\n  pending requests: {b.pending()}\n  page text:\n{page}")
        except Failure as inner:
            if inner.args[0].startswith(str(e)):
                raise inner
            raise e
    finally:
        b.close()
    print(f"scene {args.scene} passed")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scene", choices=["lists", "login", "idle"], required=True)
    p.add_argument("--base", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = p.parse_args()
    try:
        run(args)
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
