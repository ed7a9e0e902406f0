#!/usr/bin/env python3
"""A hostile GitHub-shaped tracker for scripts/reliability/tracker.sh.

Serves GET /repos/<owner>/<repo>/issues as PAGES pages of PAGE_MIB MiB each, chained by
`Link: <...page=N+1>; rel="next"`, every page a JSON array of issue objects with large bodies
(valid JSON: what a broken or hostile server could really send). MODE `length` announces each
page's size (Content-Length); `chunked` sends it with chunked transfer encoding, so the client
learns the size only by reading. STYLE `big` fills a page with issues of 256 KiB bodies;
`small` with ordinary issues of a few KiB and many fields each (users, labels, URLs), whose
parsed JSON costs several times its text. Every other path answers `[]`. Each request is
counted in STATS (one line per request: the page number). Usage:
    hostile_tracker.py PORT MODE PAGES PAGE_MIB STATS [STYLE]
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

PORT, MODE, PAGES, PAGE_MIB, STATS = (
    int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
STYLE = sys.argv[6] if len(sys.argv) > 6 else "big"
LOCK = threading.Lock()


def user(login):
    base = f"https://api.example.invalid/users/{login}"
    return {"login": login, "id": 1, "node_id": "MDQ6VXNlcjE=", "type": "User",
            "site_admin": False, "url": base, "html_url": f"https://example.invalid/{login}",
            **{f"{k}_url": f"{base}/{k}" for k in (
                "followers", "following", "gists", "starred", "subscriptions",
                "organizations", "repos", "events", "received_events")}}


def item(number):
    if STYLE == "big":
        return {"id": number, "number": number, "title": f"Hostile issue {number}",
                "state": "open", "body": "x" * (256 * 1024), "labels": [{"name": "to do"}],
                "html_url": f"https://example.invalid/o/r/issues/{number}",
                "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}
    base = f"https://api.example.invalid/repos/o/r/issues/{number}"
    labels = [{"id": i, "node_id": f"L{i}", "url": f"{base}/labels/{i}", "name": name,
               "color": "ededed", "default": False, "description": f"the {name} label"}
              for i, name in enumerate(["to do", "bug", "area/core", "p2"])]
    return {"id": number, "node_id": f"I_{number}", "number": number, "url": base,
            "repository_url": "https://api.example.invalid/repos/o/r",
            "labels_url": f"{base}/labels{{/name}}", "comments_url": f"{base}/comments",
            "events_url": f"{base}/events", "html_url": f"https://example.invalid/o/r/issues/{number}",
            "title": f"Ordinary issue {number}", "state": "open", "locked": False,
            "user": user("author"), "assignee": user("dev"), "assignees": [user("dev"), user("qa")],
            "labels": labels, "comments": 3, "author_association": "MEMBER",
            "body": "Steps to reproduce:\n1. open the app\n2. click\n" * 4,
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "reactions": {k: 0 for k in ("+1", "-1", "laugh", "hooray", "confused", "heart")}}


def page_body(page):
    """About PAGE_MIB MiB of issues, as an issues list page looks."""
    target = PAGE_MIB * 1024 * 1024
    issues, size, n = [], 2, 0
    while size < target:
        n += 1
        number = page * 100_000 + n
        text = json.dumps(item(number))
        issues.append(text)
        size += len(text) + 1
    return ("[" + ",".join(issues) + "]").encode()


PAGE = page_body(1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urlparse(self.path)
        if not url.path.endswith("/issues"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"[]")
            return
        page = int(parse_qs(url.query).get("page", ["1"])[0])
        with LOCK, open(STATS, "a") as f:
            f.write(f"{page}\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if page < PAGES:
            host = self.headers.get("Host", f"127.0.0.1:{PORT}")
            nxt = f"http://{host}{url.path}?state=open&per_page=50&page={page + 1}"
            self.send_header("Link", f'<{nxt}>; rel="next"')
        try:
            if MODE == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                step = 64 * 1024
                for i in range(0, len(PAGE), step):
                    chunk = PAGE[i:i + step]
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_header("Content-Length", str(len(PAGE)))
                self.end_headers()
                self.wfile.write(PAGE)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


ThreadingHTTPServer.daemon_threads = True
# A client that hangs up mid-page is the expected case, not an error to print.
ThreadingHTTPServer.handle_error = lambda self, request, address: None
ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
