#!/usr/bin/env python3
"""Checks the dashboard's stage views in headless Chromium against a constructed state.

Run by tests/dashboard_stages.rs against a server that serves a hand-built snapshot (a running
session and a retry on the second stage of a three-stage chain, an issue between stages held
until its stage label is read, one run that hopped); uses the DevTools driver of dashboard.py.
Exits non-zero with a message on the first failed expectation; screenshots go to --out.

    stages.py --base http://127.0.0.1:PORT --out DIR [--chromium PATH]
"""

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dashboard import Browser, Failure  # noqa: E402


def row_text(selector, text):
    return (f"Array.from(document.querySelectorAll({selector!r}))"
            f".some(el => el.textContent.includes({text!r}))")


def run(args):
    base = args.base.rstrip("/")
    os.makedirs(args.out, exist_ok=True)
    b = Browser(args.chromium)
    try:
        b.attach()
        b.emulate("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        b.goto(base + "/ui/")
        b.wait("the running row's rule and stage",
               row_text("#running li[data-running='MT-649']", "implement · 2/3"))
        b.wait("the retry row's rule and stage",
               row_text("#retrying li[data-retry='MT-650']", "implement · 2/3"))
        b.wait("the between-stages row with its move",
               row_text("#between li[data-between='MT-655']", "specify → implement"))
        b.wait("the between-stages row's status sentence",
               row_text("#between li[data-between='MT-655']",
                        "Moved from stage specify to stage implement"))
        b.wait("the hold sentence of the unconfirmed hop",
               row_text("#between li[data-between='MT-655'] .hold",
                        "Stage label stage-implement not seen on the issue yet"))
        b.wait("the between-stages count",
               "document.querySelector('#counts [data-count=between_stages] .n')?.textContent === '2'")
        b.screenshot(os.path.join(args.out, "overview-stages.png"))

        b.goto(base + "/ui/runs")
        b.wait("the Rule and Stage columns",
               row_text("#runs-table thead th", "Rule") + " && " + row_text("#runs-table thead th", "Stage"))
        b.wait("the hopping run's rule", row_text("#runs-table td.rule", "specify"))
        b.wait("the hopping run's stage and hop", row_text("#runs-table td.stage", "1/3 → implement, advanced"))
        b.screenshot(os.path.join(args.out, "runs-stages.png"))

        b.goto(base + "/ui/issues/MT-655")
        b.wait("the issue's between-stages panel",
               row_text("#between li", "Stage label stage-implement not seen on the issue yet"))
        b.wait("the next stage as what happens next",
               row_text("#next li", "Stage implement starts in a new session."))
        b.screenshot(os.path.join(args.out, "issue-between-stages.png"))
        errs = b.errors()
        if errs:
            raise Failure("console errors: " + "; ".join(errs[:5]))
    except Failure as e:
        try:
            b.screenshot(os.path.join(args.out, "failure-stages.png"))
            text = b.eval("document.body.innerText.slice(0, 2000)")
        except Failure:
            text = "(page text unavailable)"
        raise Failure(f"{e}\n  page text:\n{text}")
    finally:
        b.close()
    print("stages browser check passed")


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
