#!/usr/bin/env python3
"""Checks the dashboard's workflow switcher and "all" screen in headless Chromium.

Run by tests/browser_workflows.rs against a daemon it started; uses the DevTools driver of
dashboard.py. Two scenes:

  --scene several   `--workflows DIR` with alpha (ALPHA-1 and ALPHA-2 running), beta (BETA-1
                    running) and broken (did not load): the switcher lists the three with their
                    status; the "all" screen lists the rows (broken with its problem) and the
                    running sessions marked with their workflow; choosing a workflow shows its
                    issues and not the other's, on the screen shown; links keep the choice; a
                    click on a workflow in the "all" screen switches to it; the broken one shows
                    its problem; every API call and event stream names the workflow.
  --scene single    one workflow (ALPHA-1 running): no switcher, no call names a workflow.

Exits non-zero with a message on the first failed expectation. Screenshots go to --out.

    workflows.py --scene several|single --base http://127.0.0.1:PORT --out DIR [--chromium PATH]
"""

import argparse
import json
import os
import shutil
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dashboard import Browser, Failure  # noqa: E402


def js(v):
    return json.dumps(v)


def choose(b, name):
    """Picks `name` ("" for all) in the header's switcher as a person would."""
    b.eval("(() => { const s = document.getElementById('workflow-select'); "
           f"s.value = {js(name)}; s.dispatchEvent(new Event('change', {{ bubbles: true }})); return true; }})()")


def click(b, selector):
    b.wait(f"{selector} to click", f"!!document.querySelector({js(selector)})")
    b.eval(f"document.querySelector({js(selector)}).click(), true")


def running_ids(b, selector="#running li[data-running]"):
    return sorted(b.eval(f"[...document.querySelectorAll({js(selector)})].map((li) => li.dataset.running)") or [])


def loaded(b, what):
    b.wait(what, "document.body.dataset.loaded === 'true'")


def api_requests(b):
    """(url, status) of every /api/v1/ request the page made, status None while unanswered."""
    urls, status = {}, {}
    for e in b.events:
        p = e.get("params", {})
        if e["method"] == "Network.requestWillBeSent":
            urls[p["requestId"]] = p["request"]["url"]
        elif e["method"] == "Network.responseReceived":
            status[p["requestId"]] = p["response"]["status"]
    return [(u, status.get(r)) for r, u in urls.items() if "/api/v1/" in u]


def several(b, base, out):
    b.goto(base + "/ui/")
    # The switcher: every workflow with its status, "all" chosen.
    b.wait("the switcher's workflows", "document.querySelectorAll('#workflow-select option[data-status]').length === 3")
    options = b.eval("[...document.querySelectorAll('#workflow-select option')].map((o) => "
                     "[o.value, o.dataset.status || '', o.textContent, o.selected])")
    listed = {v: (st, text) for v, st, text, _ in options if v}
    expect = {"alpha": ("ok", "ok"), "beta": ("ok", "ok"), "broken": ("not_loaded", "not loaded")}
    for name, (st, word) in expect.items():
        if name not in listed or listed[name][0] != st or word not in listed[name][1] or name not in listed[name][1]:
            raise Failure(f"switcher option for {name}: {listed.get(name)}, expected status {st} ({word})")
    if not [o for o in options if o[0] == "" and o[3]]:
        raise Failure(f"'All workflows' is not chosen at /ui/: {options}")

    # The "all" screen: every row, the broken one's problem, every running session with its workflow.
    b.wait("the workflow rows", "document.querySelectorAll('#workflow-rows li[data-workflow]').length === 3")
    rows = dict(b.eval("[...document.querySelectorAll('#workflow-rows li[data-workflow]')].map((li) => "
                       "[li.dataset.workflow, [li.dataset.status, li.innerText]])"))
    if rows.get("alpha", [None])[0] != "ok" or rows.get("beta", [None])[0] != "ok":
        raise Failure(f"loaded workflows' rows: {rows}")
    if rows.get("broken", [None])[0] != "not_loaded" or "nosuch" not in rows["broken"][1]:
        raise Failure(f"the broken workflow's row does not show its problem: {rows.get('broken')}")
    if "running 2" not in rows["alpha"][1] or "running 1" not in rows["beta"][1]:
        raise Failure(f"running counts in the rows: {rows}")
    b.wait("every running session", "document.querySelectorAll('#running-all li[data-running]').length === 3")
    marked = sorted(b.eval("[...document.querySelectorAll('#running-all li[data-running]')].map((li) => "
                           "[li.dataset.workflow, li.dataset.running, li.querySelector('a.chip').textContent])"))
    want = [["alpha", "ALPHA-1", "alpha"], ["alpha", "ALPHA-2", "alpha"], ["beta", "BETA-1", "beta"]]
    if marked != want:
        raise Failure(f"running sessions in the all screen: {marked}, expected {want}")
    b.wait("the polling indicator", "document.getElementById('live').dataset.state === 'polling'")
    b.screenshot(os.path.join(out, "all.png"))
    print("all screen: three rows, the broken one's problem, three running sessions marked")

    # Choose alpha: its issues, none of beta's, its stream live.
    choose(b, "alpha")
    b.wait("the address to name alpha", "location.pathname === '/ui/' && location.search === '?workflow=alpha'")
    b.wait("alpha's running sessions", "document.querySelectorAll('#running li[data-running]').length === 2")
    if running_ids(b) != ["ALPHA-1", "ALPHA-2"]:
        raise Failure(f"alpha's overview runs {running_ids(b)}")
    if "BETA-" in b.eval("document.getElementById('main').innerText"):
        raise Failure("alpha's overview shows a beta issue")
    b.wait("alpha's stream", "document.getElementById('live').dataset.state === 'live'")
    href = b.eval("document.querySelector('#running li[data-running] a.id').getAttribute('href')")
    if "workflow=alpha" not in href:
        raise Failure(f"an issue link in alpha's overview drops the workflow: {href}")
    b.screenshot(os.path.join(out, "alpha.png"))
    print("alpha chosen: its two sessions, no beta issue, stream live")

    # The choice survives a move to another screen, and switching there keeps the screen.
    click(b, "nav a[data-screen=runs]")
    b.wait("alpha's runs screen", "location.pathname === '/ui/runs' && location.search === '?workflow=alpha'")
    loaded(b, "alpha's runs")
    choose(b, "beta")
    b.wait("beta's runs screen", "location.pathname === '/ui/runs' && location.search === '?workflow=beta'")
    loaded(b, "beta's runs")
    if b.eval("!!document.querySelector('#main .banner.error')"):
        raise Failure("beta's runs screen shows an error: " + b.eval("document.getElementById('main').innerText"))
    click(b, "nav a[data-screen=overview]")
    b.wait("beta's overview", "location.pathname === '/ui/' && location.search === '?workflow=beta'")
    b.wait("beta's running session", "document.querySelectorAll('#running li[data-running]').length === 1")
    if running_ids(b) != ["BETA-1"]:
        raise Failure(f"beta's overview runs {running_ids(b)}")
    if "ALPHA-" in b.eval("document.getElementById('main').innerText"):
        raise Failure("beta's overview shows an alpha issue")
    b.screenshot(os.path.join(out, "beta.png"))

    # An issue of beta, through its link.
    click(b, "#running li[data-running=BETA-1] a.id")
    b.wait("BETA-1's page", "location.pathname === '/ui/issues/BETA-1' && location.search === '?workflow=beta'")
    b.wait("BETA-1's status", "!!document.querySelector('#status p')")
    loaded(b, "BETA-1's page")
    if b.eval("!!document.querySelector('#main .banner.error')"):
        raise Failure("BETA-1's page shows an error: " + b.eval("document.getElementById('main').innerText"))
    print("beta chosen on the runs screen, its overview and its issue page")

    # Back to all, and a click on a workflow there switches to it.
    choose(b, "")
    b.wait("the all screen again", "location.pathname === '/ui/' && location.search === '' && "
           "document.querySelectorAll('#workflow-rows li[data-workflow]').length === 3")
    click(b, "#workflow-rows li[data-workflow=alpha] a.id")
    b.wait("alpha from its row", "location.search === '?workflow=alpha' && "
           "document.getElementById('workflow-select').value === 'alpha' && "
           "document.querySelectorAll('#running li[data-running]').length === 2")
    print("a click on a workflow's row switches to it")

    # The broken one: its problem, and nothing asked of it.
    choose(b, "broken")
    b.wait("the broken workflow's screen", "location.search === '?workflow=broken' && !!document.querySelector('#not-loaded')")
    problem = b.wait("its problem", "document.querySelector('#problems .problem')?.textContent")
    if "nosuch" not in problem:
        raise Failure(f"the broken workflow's problem reads {problem!r}")
    b.wait("no stream for it", "document.getElementById('live').dataset.state === 'polling'")
    b.screenshot(os.path.join(out, "broken.png"))
    print("broken chosen: its problem")

    # The "all" screen and the switcher at phone width, dark: nothing scrolls sideways.
    b.emulate("Emulation.setDeviceMetricsOverride",
              {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
    b.emulate("Emulation.setEmulatedMedia",
              {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    choose(b, "")
    b.wait("the all screen on a phone", "location.search === '' && "
           "document.querySelectorAll('#running-all li[data-running]').length === 3")
    wide = b.eval("document.documentElement.scrollWidth > window.innerWidth + 1")
    b.screenshot(os.path.join(out, "all-phone-dark.png"))
    if wide:
        raise Failure("the all screen scrolls sideways at phone width")

    # Every call named its workflow and none was refused.
    reqs = api_requests(b)
    unnamed = [u for u, _ in reqs if "/api/v1/workflows" not in u
               and "workflow" not in urllib.parse.parse_qs(urllib.parse.urlparse(u).query)]
    if unnamed:
        raise Failure(f"API calls without ?workflow=: {unnamed[:5]}")
    refused = [(u, s) for u, s in reqs if s is not None and s >= 400]
    if refused:
        raise Failure(f"API calls refused: {refused[:5]}")
    for name in ("alpha", "beta"):
        if not [u for u, _ in reqs if "/api/v1/events" in u and f"workflow={name}" in u]:
            raise Failure(f"no event stream named {name}: {[u for u, _ in reqs if '/events' in u]}")
    if [u for u, _ in reqs if "workflow=broken" in u]:
        raise Failure("the dashboard asked the broken workflow for something")
    print(f"{len(reqs)} API calls, each naming its workflow")


def single(b, base, out):
    b.goto(base + "/ui/")
    b.wait("the running session", "!!document.querySelector('#running li[data-running=\"ALPHA-1\"]')")
    b.wait("the live stream", "document.getElementById('live').dataset.state === 'live'")
    loaded(b, "the overview")
    if b.eval("!!document.getElementById('workflow-switcher') || !!document.getElementById('workflow-select')"):
        raise Failure("a daemon with one workflow shows a switcher")
    hrefs = b.eval("[...document.querySelectorAll('header a[data-nav]'), document.querySelector('#running a.id')]"
                   ".map((a) => a.getAttribute('href'))")
    if hrefs != ["/ui/", "/ui/", "/ui/runs", "/ui/prices", "/ui/health", "/ui/issues/ALPHA-1"]:
        raise Failure(f"links changed with one workflow: {hrefs}")
    if b.eval("document.title") != "Overview · sortie":
        raise Failure(f"title: {b.eval('document.title')}")
    click(b, "#running li[data-running=ALPHA-1] a.id")
    b.wait("ALPHA-1's page", "location.pathname === '/ui/issues/ALPHA-1' && location.search === ''")
    b.wait("ALPHA-1's status", "!!document.querySelector('#status p')")
    b.screenshot(os.path.join(out, "single.png"))
    reqs = api_requests(b)
    named = [u for u, _ in reqs if "workflow=" in u]
    if named:
        raise Failure(f"calls name a workflow with one workflow: {named[:5]}")
    if not [u for u, _ in reqs if u.endswith("/api/v1/workflows")]:
        raise Failure("the dashboard never read the workflow list")
    print(f"one workflow: no switcher, {len(reqs)} API calls, none naming a workflow")


def run(args):
    base = args.base.rstrip("/")
    os.makedirs(args.out, exist_ok=True)
    b = Browser(args.chromium)
    try:
        b.attach()
        b.emulate("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        {"several": several, "single": single}[args.scene](b, base, args.out)
        errs = b.errors()
        if errs:
            raise Failure("console errors: " + "; ".join(errs[:5]))
    except Failure as e:
        try:
            b.screenshot(os.path.join(args.out, f"failure-{args.scene}.png"))
            text = b.eval("document.body.innerText.slice(0, 1500)")
            raise Failure(f"{e}\n  address: {b.eval('location.href')}; pending requests: {b.pending()}\n  page text:\n{text}")
        except Failure as inner:
            if inner.args[0].startswith(str(e)):
                raise inner
            raise e
    finally:
        b.close()
    print(f"browser scene {args.scene} passed (Chromium restarts after stalled loads: {b.restarts})")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scene", required=True, choices=["several", "single"])
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
