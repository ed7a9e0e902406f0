#!/usr/bin/env python3
"""Checks the dashboard's Overview while a spend window holds dispatch, in headless Chromium.

Run by tests/spend_ceiling_daemon.rs against a daemon whose daily window has reached its
ceiling; uses the DevTools driver of dashboard.py. Exits non-zero with a message on the first
failed expectation; the screenshot goes to --out.

    spend_ceiling.py --base http://127.0.0.1:PORT --out DIR [--chromium PATH]
"""

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dashboard import Browser, Failure  # noqa: E402


def some_row(panel, text):
    return (f"Array.from(document.querySelectorAll('#{panel} li'))"
            f".some(li => li.textContent.includes({text!r}))")


def run(args):
    base = args.base.rstrip("/")
    os.makedirs(args.out, exist_ok=True)
    b = Browser(args.chromium)
    try:
        b.attach()
        b.emulate("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        b.goto(base + "/ui/")
        b.wait("the daily window holding dispatch",
               "document.querySelector('#spend li[data-window=daily]')?.dataset.holding === 'true'")
        b.wait("the window's spend and ceiling",
               some_row("spend", "$0.05") + " && " + some_row("spend", "$0.01"))
        b.wait("the weekly window without a ceiling", some_row("spend", "no ceiling"))
        b.wait("the issue held by the daily ceiling", some_row("held", "Daily spend ceiling reached"))
        b.wait("the spend ceiling attention item", some_row("attention", "Daily spend ceiling reached"))
        b.screenshot(os.path.join(args.out, "overview-spend-ceiling.png"))
        errs = b.errors()
        if errs:
            raise Failure("console errors: " + "; ".join(errs[:5]))
    except Failure as e:
        try:
            b.screenshot(os.path.join(args.out, "failure-spend-ceiling.png"))
            text = b.eval("document.body.innerText.slice(0, 1500)")
        except Failure:
            text = "(page text unavailable)"
        raise Failure(f"{e}\n  page text:\n{text}")
    finally:
        b.close()
    print("spend ceiling browser check passed")


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
