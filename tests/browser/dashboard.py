#!/usr/bin/env python3
"""Drives the sortie dashboard in headless Chromium over the DevTools protocol.

No third-party packages: Chromium is started with --remote-debugging-pipe, so the protocol
runs over two pipes (fd 3: commands in, fd 4: replies out; NUL-terminated JSON) instead of a
WebSocket. Run by tests/browser_dashboard.rs against a daemon it started; exits non-zero with a
message on the first failed expectation. Screenshots go to --out.

    dashboard.py --base http://127.0.0.1:PORT --out DIR [--chromium PATH]
"""

import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

WAIT_S = 90


class Failure(Exception):
    pass


class Browser:
    def __init__(self, chromium, width=1280, height=1000):
        self.chromium = chromium
        self.emulation = []  # (method, params) to re-apply after a restart
        self.restarts = 0
        self._launch(width, height)

    def _launch(self, width, height):
        self.profile = tempfile.mkdtemp(prefix="sortie-chromium-")
        cmd_r, self.cmd_w = os.pipe()
        self.out_r, out_w = os.pipe()

        def wire():
            # Move the child's ends to fds 3 and 4 without clobbering either on the way.
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
            b = fcntl.fcntl(out_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [self.chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
             "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, close_fds=False)
        os.close(cmd_r)
        os.close(out_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise Failure("chromium did not answer in time")
            chunk = os.read(self.out_r, 65536)
            if not chunk:
                raise Failure("chromium closed the DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == mid:
                if "error" in m:
                    raise Failure(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def emulate(self, method, params):
        self.emulation.append((method, params))
        self.call(method, params)

    def restart(self, why):
        """A fresh Chromium: its old connections close, which frees whatever server threads
        they held (see goto)."""
        self.restarts += 1
        print(f"WARNING: restarting Chromium ({why})", file=sys.stderr)
        self.close()
        self._launch(1280, 1000)
        self.attach()
        for method, params in self.emulation:
            self.call(method, params)

    def attach(self):
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            self.call(domain)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise Failure(f"script error in {expr!r}: {r['exceptionDetails'].get('text')}")
        return r.get("result", {}).get("value")

    def wait(self, what, expr, timeout=WAIT_S):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.2)
        raise Failure(f"timed out waiting for {what}: {expr}")

    def goto(self, url):
        """Loads url. tiny_http 0.12 can leave a new keep-alive connection unread when several
        open at once (its task pool may queue the connection with no thread free to take it),
        so a load that stalls is retried in a fresh browser, loudly, at most twice."""
        for attempt in range(3):
            try:
                self.call("Page.navigate", {"url": url}, timeout=20)
                self.wait("the page to load", "document.readyState === 'complete'", timeout=20)
                return
            except Failure as e:
                err = f"{e} at {url}; requests still pending: {self.pending()}"
                if attempt == 2:
                    raise Failure(err)
                self.restart(err)

    def pending(self):
        """URLs Chromium asked for and got no complete answer to (event streams excepted)."""
        urls, order = {}, []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Network.requestWillBeSent":
                urls[p["requestId"]] = p["request"]["url"]
                order.append(p["requestId"])
            elif e["method"] in ("Network.loadingFinished", "Network.loadingFailed"):
                urls.pop(p["requestId"], None)
        return [urls[r] for r in order if r in urls and "/api/v1/events" not in urls[r]]

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        print(f"screenshot {path}")

    def errors(self):
        """Script exceptions and console errors from scripts or the CSP."""
        out = []
        for e in self.events:
            if e["method"] == "Runtime.exceptionThrown":
                out.append(e["params"]["exceptionDetails"].get("text", "exception"))
            elif e["method"] == "Log.entryAdded":
                entry = e["params"]["entry"]
                if entry.get("level") == "error" and entry.get("source") in ("javascript", "security"):
                    out.append(f"{entry.get('source')}: {entry.get('text')}")
        return out

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def api(base, path):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.load(r)


def parse_time(iso):
    from datetime import datetime
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def run(args):
    base = args.base.rstrip("/")
    out = args.out
    os.makedirs(out, exist_ok=True)
    b = Browser(args.chromium)
    try:
        b.attach()
        b.emulate("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})

        # Overview: a running session appears and the stream goes live.
        b.goto(base + "/ui/")
        b.wait("a running session", "!!document.querySelector('#running li[data-running]')")
        b.wait("the live stream", "document.getElementById('live').dataset.state === 'live'")
        b.wait("the counts", "!!document.querySelector('#counts .card')")

        # Run now: click it on a retry whose due time leaves room to tell it from the timer.
        ident = due = before = None
        deadline = time.time() + WAIT_S
        while time.time() < deadline:
            st = api(base, "/api/v1/state")
            rows = [r for r in st.get("retrying", []) if parse_time(r["due_at"]) - time.time() > 4]
            limit = ((st.get("config") or {}).get("agent") or {}).get("max_concurrent_agents") or 1
            # Only with a free slot can the retry start: otherwise sortie puts it back as it was.
            if rows and len(st.get("running", [])) < limit:
                r = rows[0]
                sel = f"[data-action=run-now][data-identifier=\"{r['issue_identifier']}\"]"
                if b.eval(f"!!document.querySelector({json.dumps(sel)})"):
                    ident, due, before = r["issue_identifier"], parse_time(r["due_at"]), r["attempt"]
                    b.screenshot(os.path.join(out, "overview.png"))
                    b.eval(f"document.querySelector({json.dumps(sel)}).click(), true")
                    break
            time.sleep(0.2)
        if ident is None:
            raise Failure("no retry with a Run now button appeared")
        print(f"clicked run now on {ident} (attempt {before}, due in {due - time.time():.1f}s)")
        note_js = f"(document.querySelector({json.dumps(sel)})?.nextElementSibling?.textContent || '').trim()"
        # The effect, through the API, before the retry would have fired by itself.
        effect = None
        seen = []
        while time.time() < due - 0.5:
            st = api(base, "/api/v1/state")
            seen.append([(r["issue_identifier"], r.get("attempt"), r.get("due_at")) for r in st.get("retrying", [])])
            running = [r["issue_identifier"] for r in st.get("running", [])]
            retry = [r for r in st.get("retrying", []) if r["issue_identifier"] == ident]
            held = [r["issue_identifier"] for r in st.get("budget_exhausted", [])]
            if ident in running or ident in held or (retry and retry[0]["attempt"] > before):
                effect = "dispatched"
                break
            time.sleep(0.1)
        if effect is None:
            note = b.eval(note_js)
            raise Failure(f"run now on {ident} had no effect before its due time (button said: {note!r}; "
                          f"retry rows seen: {seen[:1]} … {seen[-1:]})")
        print(f"run now took effect on {ident}")

        # Acknowledge an attention item.
        sel = "[data-action=acknowledge]"
        item = b.wait("an attention item to acknowledge",
                      f"(document.querySelector({json.dumps(sel)}) || {{}}).dataset?.id", timeout=150)
        b.screenshot(os.path.join(out, "overview-attention.png"))
        b.eval(f"document.querySelector('[data-action=acknowledge][data-id=\"{item}\"]').click(), true")
        deadline = time.time() + 20
        while True:
            st = api(base, "/api/v1/state")
            acked = [a for a in st.get("attention", []) if a.get("id") == item and a.get("acknowledged_at")]
            if acked:
                break
            if time.time() > deadline:
                raise Failure(f"attention item {item} was not acknowledged")
            time.sleep(0.2)
        b.wait("the acknowledged row", f"!!document.querySelector('li.acked[data-attention=\"{item}\"]')")
        print(f"acknowledged attention item {item}")

        # Issue screen of a running session: status, next outcomes, live events.
        running = b.eval("document.querySelector('#running li[data-running]').dataset.running")
        b.goto(f"{base}/ui/issues/{running}")
        b.wait("the issue status", "!!document.querySelector('#status p')")
        b.wait("live agent events", "document.querySelectorAll('#events li').length > 0")
        b.screenshot(os.path.join(out, "issue.png"))

        # Issue screen of the retried issue: run history with errors.
        b.goto(f"{base}/ui/issues/{ident}")
        b.wait("the run history", "document.querySelectorAll('#history tbody tr').length > 0")
        b.screenshot(os.path.join(out, "issue-history.png"))

        # Runs, filtered and grouped.
        b.goto(base + "/ui/runs")
        b.wait("the runs table", "document.querySelectorAll('#runs-table tbody tr').length > 0")
        b.screenshot(os.path.join(out, "runs.png"))
        # Paging: two runs a page, then the next page by its cursor.
        b.goto(base + "/ui/runs?limit=2")
        b.wait("a page of two runs", "document.querySelectorAll('#runs-table tbody tr').length === 2")
        first = b.eval("document.querySelector('#runs-table tbody tr').dataset.run")
        b.wait("the Older button", "!!document.querySelector('[data-action=older]')")
        b.eval("document.querySelector('[data-action=older]').click(), true")
        b.wait("the next page", "location.search.includes('cursor=') && "
               "document.querySelectorAll('#runs-table tbody tr').length > 0 && "
               f"document.querySelector('#runs-table tbody tr').dataset.run !== {json.dumps(first)}")
        b.goto(base + "/ui/runs?view=issues&status=failed")
        b.wait("runs grouped by issue", "document.querySelectorAll('#results li').length > 0")
        b.screenshot(os.path.join(out, "runs-by-issue.png"))

        # Prices: a model the runs spent tokens on, with its rates and the sources.
        b.goto(base + "/ui/prices")
        b.wait("a model row", "document.querySelectorAll('#prices-models tbody tr[data-model]').length > 0")
        b.wait("the built-in table's source", "!!document.querySelector('#source-built-in')")
        b.screenshot(os.path.join(out, "prices.png"))

        # Health & Workflow.
        b.goto(base + "/ui/health")
        b.wait("the health checks", "document.querySelectorAll('#health-checks li').length > 0")
        b.wait("the config", "!!document.querySelector('#config dl')")
        # The host list is not a check, and without SSH hosts there is no host panel.
        b.wait("no host list among the checks",
               "!document.querySelector('#health-checks li[data-check=ssh_hosts]') && !document.querySelector('#hosts')")
        b.screenshot(os.path.join(out, "health.png"))

        # Phone width, dark.
        b.emulate("Emulation.setDeviceMetricsOverride",
                  {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
        b.emulate("Emulation.setEmulatedMedia",
                  {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        b.goto(base + "/ui/")
        b.wait("the overview on a phone", "!!document.querySelector('#running li[data-running]')")
        wide = b.eval("document.documentElement.scrollWidth > window.innerWidth + 1")
        b.screenshot(os.path.join(out, "overview-phone-dark.png"))
        if wide:
            raise Failure("the overview scrolls sideways at phone width")

        errs = b.errors()
        if errs:
            raise Failure("console errors: " + "; ".join(errs[:5]))
    except Failure as e:
        # Evidence for whoever reads the CI log: what the page showed and what was pending.
        try:
            b.screenshot(os.path.join(out, "failure.png"))
            text = b.eval("document.body.innerText.slice(0, 1500)")
            live = b.eval("document.getElementById('live')?.dataset.state")
            raise Failure(f"{e}\n  stream: {live}; pending requests: {b.pending()}\n  page text:\n{text}")
        except Failure as inner:
            if inner.args[0].startswith(str(e)):
                raise inner
            raise e
    finally:
        b.close()
    print(f"browser test passed (Chromium restarts after stalled loads: {b.restarts})")


def main():
    p = argparse.ArgumentParser()
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
