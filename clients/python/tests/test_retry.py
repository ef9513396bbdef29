"""Retries, with a proxy in front of the real server that stands in for it
with 429s and 503s; and the errors that have no server to answer."""

import datetime
import email.utils
import socket
import time
import unittest
from typing import List, Tuple

import webhookd
from webhookd.errors import parse_retry_after

from support import Fault, Proxy, admin_client, first_only, server, unique


class RetryTest(unittest.TestCase):
    def setUp(self) -> None:
        self.url, self.token = server()
        self.tenant = unique("py-retry")
        admin_client().put_tenant(self.tenant)
        admin_client().put_event_type("py.paid")
        self.waits: List[float] = []

    def proxied(self, fault: Fault, every: bool = False,
                max_attempts: int = webhookd.DEFAULT_MAX_ATTEMPTS,
                max_retry_wait: float = webhookd.DEFAULT_MAX_RETRY_WAIT) -> Tuple[webhookd.Client, Proxy]:
        """Return a client of a proxy in front of the server that answers
        the first request with fault (every request, with every set)."""
        proxy = Proxy(self.url, (lambda n, m, p: fault) if every else first_only(fault))
        self.addCleanup(proxy.close)
        c = webhookd.Client(proxy.url, self.token, timeout=30, sleep=self.sleep,
                            max_attempts=max_attempts, max_retry_wait=max_retry_wait)
        return c, proxy

    def sleep(self, s: float) -> None:
        self.waits.append(s)
        time.sleep(min(s, 0.05))

    def test_ingest_retried_after_503(self) -> None:
        # The case idempotency keys exist for: the server stored the event
        # but the answer the client got was a 503. The retry, after
        # Retry-After, sends the same key and gets the same event.
        c, proxy = self.proxied(Fault(503, retry_after="1", forward=True))
        res = c.ingest(self.tenant, {"type": "py.paid", "data": {"id": "in_1"}})
        self.assertTrue(res["replayed"])
        self.assertEqual(self.waits, [1.0])
        keys = [h["idempotency-key"] for _, _, h in proxy.requests()]
        self.assertEqual(keys, [res["idempotency_key"]] * 2)
        self.assertEqual([e["event"]["id"] for e in admin_client().feed(self.tenant)], [res["id"]])

    def test_get_retried_after_429(self) -> None:
        when = email.utils.format_datetime(datetime.datetime.now(datetime.timezone.utc)
                                           + datetime.timedelta(seconds=3), usegmt=True)
        c, proxy = self.proxied(Fault(429, retry_after=when))
        self.assertEqual(c.get_tenant(self.tenant)["id"], self.tenant)
        self.assertEqual(len(proxy.requests()), 2)
        self.assertEqual(len(self.waits), 1)
        self.assertTrue(1.0 <= self.waits[0] <= 3.0, self.waits)

    # PUT and DELETE are idempotent (RFC 9110 §9.2.2): repeated as a GET is.

    def test_delete_retried_after_503(self) -> None:
        gone = unique("py-retry")
        admin_client().put_tenant(gone)
        c, proxy = self.proxied(Fault(503, retry_after="1"))
        task = c.delete_tenant(gone, force=True)
        self.assertEqual(task["kind"], "tenant.purge")
        self.assertEqual(self.waits, [1.0])
        self.assertEqual([m for m, _, _ in proxy.requests()], ["DELETE", "DELETE"])
        with self.assertRaises(webhookd.Problem) as cm:
            admin_client().get_tenant(gone)
        self.assertIn(cm.exception.code, ("tenant_not_found", "tenant_deleting"))

    def test_put_retried_after_503(self) -> None:
        # The server made the tenant, but the answer was lost to a 503: the
        # repeat finds it and says so.
        made = unique("py-retry")
        c, proxy = self.proxied(Fault(503, retry_after="1", forward=True))
        tenant, created = c.put_tenant(made, {"name": "Put twice"})
        self.addCleanup(admin_client().delete_tenant, made, force=True)
        self.assertEqual((tenant["id"], tenant["name"], created), (made, "Put twice", False))
        self.assertEqual(self.waits, [1.0])
        self.assertEqual(len(proxy.requests()), 2)

    def test_put_event_type_retried_after_429(self) -> None:
        name = unique("py").replace("-", "_") + ".voided"
        c, proxy = self.proxied(Fault(429, retry_after="1"))
        event_type, created = c.put_event_type(name)
        self.addCleanup(admin_client().delete_event_type, name)
        self.assertEqual((event_type["name"], created), (name, True))
        self.assertEqual(len(proxy.requests()), 2)

    def test_backoff_without_retry_after(self) -> None:
        c, proxy = self.proxied(Fault(503), every=True, max_attempts=3)
        with self.assertRaises(webhookd.Problem) as cm:
            c.get_tenant(self.tenant)
        self.assertEqual((cm.exception.status, cm.exception.code), (503, "unavailable"))
        self.assertEqual(self.waits, [1.0, 2.0])
        self.assertEqual(len(proxy.requests()), 3)

    def test_not_retried(self) -> None:
        ep = admin_client().create_endpoint(self.tenant, {"url": "http://127.0.0.1:9/hook",
                                                          "event_types": ["py.paid"]})
        with self.subTest("a POST that creates"):
            c, proxy = self.proxied(Fault(503, retry_after="1"))
            with self.assertRaises(webhookd.Problem) as cm:
                c.create_endpoint(self.tenant, {"url": "http://127.0.0.1:9/hook",
                                                "event_types": ["py.paid"]})
            self.assertEqual((cm.exception.status, cm.exception.retry_after), (503, 1.0))
            self.assertEqual(len(proxy.requests()), 1)
        with self.subTest("a PATCH"):
            c, proxy = self.proxied(Fault(503, retry_after="1"))
            with self.assertRaises(webhookd.Problem):
                c.update_endpoint(self.tenant, ep["id"], {"description": "patched"})
            self.assertEqual(len(proxy.requests()), 1)
        with self.subTest("attempts run out"):
            c, proxy = self.proxied(Fault(429, retry_after="1"), every=True, max_attempts=2)
            with self.assertRaises(webhookd.Problem):
                c.get_tenant(self.tenant)
            self.assertEqual(len(proxy.requests()), 2)
        with self.subTest("a wait longer than max_retry_wait"):
            c, proxy = self.proxied(Fault(429, retry_after="120"), max_retry_wait=60)
            with self.assertRaises(webhookd.Problem) as cm:
                c.get_tenant(self.tenant)
            self.assertEqual((cm.exception.retry_after, len(proxy.requests())), (120.0, 1))
        with self.subTest("ready asks once"):
            c, proxy = self.proxied(Fault(503, retry_after="1"))
            with self.assertRaises(webhookd.Problem):
                c.ready()
            self.assertEqual(len(proxy.requests()), 1)

    def test_not_problem_json(self) -> None:
        c, _ = self.proxied(Fault(502, plain=True))
        with self.assertRaises(webhookd.Problem) as cm:
            c.get_tenant(self.tenant)
        p = cm.exception
        self.assertEqual((p.status, p.code, p.title, p.detail), (502, None, "Bad Gateway", "bad gateway"))
        self.assertEqual(str(p), "webhookd: 502: bad gateway")

    def test_headers(self) -> None:
        c, proxy = self.proxied(Fault())
        c.get_tenant(self.tenant)
        [(_, path, h)] = proxy.requests()
        self.assertEqual(path, "/v1/tenants/" + self.tenant)
        self.assertEqual((h["authorization"], h["user-agent"]),
                         ("Bearer " + self.token, webhookd.DEFAULT_USER_AGENT))
        self.assertNotIn(self.token, repr(c))


class OfflineTest(unittest.TestCase):
    def test_transport_error(self) -> None:
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        c = webhookd.Client(f"http://127.0.0.1:{port}", "token", timeout=5)
        with self.assertRaises(webhookd.TransportError) as cm:
            c.health()
        self.assertIsInstance(cm.exception.__cause__, OSError)

    def test_base_url(self) -> None:
        for bad in ("127.0.0.1:8080", "ftp://host", "http://", "http://h/?q=1", "http://h/#f"):
            with self.subTest(bad), self.assertRaises(ValueError):
                webhookd.Client(bad)
        self.assertEqual(webhookd.Client("http://h:1/prefix/").base_url, "http://h:1/prefix")

    def test_retry_after(self) -> None:
        now = time.time()
        later = email.utils.formatdate(now + 30, usegmt=True)
        for value, want in [("", None), ("7", 7.0), ("-1", None), ("soon", None),
                            ("99999999999", float(1 << 31)), (later, 30.0)]:
            with self.subTest(value):
                got = parse_retry_after(value, now)
                if want is None or got is None:
                    self.assertEqual(got, want)
                else:
                    self.assertAlmostEqual(got, want, delta=1.0)

    def test_times(self) -> None:
        t = datetime.datetime(2026, 12, 2, 15, 35, 10, 123456,
                              tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
        self.assertEqual(webhookd.format_time(t), "2026-12-02T14:35:10.123Z")
        self.assertEqual(webhookd.parse_time("2026-12-02T14:35:10.123Z"),
                         datetime.datetime(2026, 12, 2, 14, 35, 10, 123000, tzinfo=datetime.timezone.utc))
        with self.assertRaises(ValueError):
            webhookd.format_time(datetime.datetime(2026, 1, 1))


if __name__ == "__main__":
    unittest.main()
