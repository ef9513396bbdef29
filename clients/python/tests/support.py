"""What the tests share: the server under test, a receiver that checks
every signature, a proxy that stands in for the server, a bounded poller."""

import base64
import hashlib
import hmac
import http.server
import os
import threading
import time
import unittest
import urllib.error
import urllib.request
from typing import Callable, Dict, List, Optional, Tuple

import webhookd

URL_ENV = "WEBHOOKD_URL"
TOKEN_ENV = "WEBHOOKD_TOKEN"


def server() -> Tuple[str, str]:
    """Return the URL and admin token of the webhookd under test
    (e2e/client_python_test.go starts one), or skip the test."""
    url, token = os.environ.get(URL_ENV, ""), os.environ.get(TOKEN_ENV, "")
    if not url or not token:
        raise unittest.SkipTest(f"{URL_ENV} and {TOKEN_ENV} name no webhookd: "
                                "go test -run TestClientPython ./e2e starts one")
    return url, token


def wait_for(what: str, cond: Callable[[], bool], limit: float = 15.0) -> None:
    """Call cond at once and then every 20 ms until it holds; fail after
    limit seconds."""
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit:g}s waiting for {what}")
        time.sleep(0.02)


def signatures_valid(secret: str, msg_id: str, timestamp: str, body: bytes,
                     header: str) -> bool:
    """Report whether header (webhook-signature) has a Standard Webhooks
    signature of the message by secret."""
    key = base64.b64decode(secret[len("whsec_"):])
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    want = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(s.partition(",")[2], want) for s in header.split(" "))


def challenge_response(secret: str, challenge: str) -> str:
    key = base64.b64decode(secret[len("whsec_"):])
    vk = hmac.new(key, b"wev-v1", hashlib.sha256).digest()
    return "v1," + base64.b64encode(hmac.new(vk, challenge.encode(), hashlib.sha256).digest()).decode()


class Request:
    def __init__(self, path: str, headers: Dict[str, str], body: bytes) -> None:
        self.path = path
        self.headers = headers  # by lower-case name
        self.body = body

    def signed_by(self, secret: str) -> bool:
        h = self.headers
        return signatures_valid(secret, h.get("webhook-id", ""), h.get("webhook-timestamp", ""),
                                self.body, h.get("webhook-signature", ""))


class Receiver:
    """An HTTP receiver on 127.0.0.1 that keeps every request. It answers
    the paths under /fail/ with 400 (a permanent failure), every other with
    200, and a verification challenge with the secret set for its path."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: List[Request] = []
        self.secrets: Dict[str, str] = {}
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                headers = {k.lower(): v for k, v in self.headers.items()}
                challenge = headers.get("webhook-challenge")
                with receiver.lock:
                    secret = receiver.secrets.get(self.path)
                    if not challenge:
                        receiver.got.append(Request(self.path, headers, body))
                if challenge:
                    self.send_response(200 if secret else 401)
                    if secret:
                        self.send_header("webhook-challenge-response",
                                         challenge_response(secret, challenge))
                elif self.path.startswith("/fail/"):
                    self.send_response(400)
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def requests(self, path: str, event_id: Optional[str] = None) -> List[Request]:
        with self.lock:
            return [r for r in self.got if r.path == path
                    and (event_id is None or r.headers.get("webhook-id") == event_id)]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Fault:
    """What the proxy does with one request: answer status itself (with
    retry_after, and a problem+json body unless plain), after forwarding
    the request to the server when forward is set; status 0: forward it
    and pass the answer on."""

    def __init__(self, status: int = 0, retry_after: str = "", forward: bool = False,
                 plain: bool = False) -> None:
        self.status = status
        self.retry_after = retry_after
        self.forward = forward
        self.plain = plain


class Proxy:
    """A proxy on 127.0.0.1 in front of the real server that can stand in
    for it: fault(n, method, path) says what to do with the n-th request
    (1-based). It keeps every request it got: (method, path, headers)."""

    def __init__(self, target: str, fault: Callable[[int, str, str], Fault]) -> None:
        self.lock = threading.Lock()
        self.got: List[Tuple[str, str, Dict[str, str]]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def handle_any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                with proxy.lock:
                    proxy.got.append((self.command, self.path, {k.lower(): v for k, v in headers.items()}))
                    count = len(proxy.got)
                f = fault(count, self.command, self.path)
                status, out_headers, out = 0, [], b""
                if f.status == 0 or f.forward:
                    req = urllib.request.Request(target + self.path, data=body, headers=headers,
                                                 method=self.command)
                    try:
                        with urllib.request.urlopen(req, timeout=30) as resp:
                            status, out_headers, out = resp.status, list(resp.headers.items()), resp.read()
                    except urllib.error.HTTPError as e:
                        status, out_headers, out = e.code, list(e.headers.items()), e.read()
                if f.status:
                    if f.forward and status >= 300:
                        raise AssertionError(f"the server answered {status} behind the fault: {out!r}")
                    status, out_headers = f.status, []
                    if f.plain:
                        out = b"bad gateway\n"
                        out_headers.append(("Content-Type", "text/plain"))
                    else:
                        out = (b'{"type":"urn:webhookd:problem:unavailable","title":"Service unavailable",'
                               b'"status":%d,"code":"unavailable","detail":"try again"}' % f.status)
                        out_headers.append(("Content-Type", "application/problem+json"))
                    if f.retry_after:
                        out_headers.append(("Retry-After", f.retry_after))
                self.send_response(status)
                for k, v in out_headers:
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def requests(self) -> List[Tuple[str, str, Dict[str, str]]]:
        with self.lock:
            return list(self.got)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def first_only(f: Fault) -> Callable[[int, str, str], Fault]:
    """A fault of the first request only."""
    return lambda n, method, path: f if n == 1 else Fault()


def unique(prefix: str) -> str:
    """Return a tenant id no other test uses."""
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 10**9}"


def admin_client(max_attempts: int = webhookd.DEFAULT_MAX_ATTEMPTS) -> webhookd.Client:
    """Return a client of the server under test with its admin token."""
    url, token = server()
    return webhookd.Client(url, token, timeout=30, max_attempts=max_attempts)
