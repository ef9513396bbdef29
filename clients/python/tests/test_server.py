"""The client against a real webhookd (WEBHOOKD_URL, WEBHOOKD_TOKEN): every
operation, the errors, the pages, the feed, the retries of ingest."""

import contextlib
import datetime
import io
import json
import unittest
from pathlib import Path
from typing import Any, ClassVar, List

import webhookd
from webhookd.models import CreatedEndpoint

from support import Receiver, admin_client, server, unique, wait_for

UTC = datetime.timezone.utc


class ServerTest(unittest.TestCase):
    client: ClassVar[webhookd.Client]
    receiver: ClassVar[Receiver]

    @classmethod
    def setUpClass(cls) -> None:
        server()
        cls.client = admin_client()
        cls.receiver = Receiver()
        for name in ("py.paid", "py.failed"):
            cls.client.put_event_type(name, {"description": "a type of the Python client's tests",
                                             "example": {"id": "in_example"}})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.receiver.close()

    def tenant(self) -> str:
        """Make a tenant of the test's own and return its id."""
        tid = unique("py")
        t, created = self.client.put_tenant(tid, {"name": "Python"})
        self.assertTrue(created)
        self.assertEqual(t["id"], tid)
        return tid

    def endpoint(self, tenant: str, path: str, types: List[str] = ["*"]) -> CreatedEndpoint:
        """Make an endpoint of tenant at the receiver's path."""
        ep = self.client.create_endpoint(tenant, {"url": self.receiver.url + path,
                                                  "event_types": types})
        self.receiver.secrets[path] = ep["secret"]
        return ep

    def wait_state(self, tenant: str, delivery: str, state: str) -> None:
        last: List[Any] = [None]

        def reached() -> bool:
            last[0] = self.client.get_delivery(tenant, delivery)
            return bool(last[0]["state"] == state)
        try:
            wait_for(f"delivery {delivery} to be {state}", reached)
        except AssertionError:
            self.fail(f"delivery {delivery}: {last[0]}")

    def assertProblem(self, p: webhookd.Problem, status: int, code: str,
                      field: Any = None) -> None:
        self.assertEqual((p.status, p.code, p.field), (status, code, field), repr(p))
        self.assertTrue(p.detail, repr(p))
        self.assertEqual(p.type, "urn:webhookd:problem:" + code)

    def test_health(self) -> None:
        self.assertEqual(self.client.health(), {"status": "ok"})
        self.assertEqual(self.client.ready(), {"status": "ready"})

    def test_tenant(self) -> None:
        tid = self.tenant()
        t, created = self.client.put_tenant(tid, {"name": "Python renamed"})
        self.assertFalse(created)
        self.assertEqual(self.client.get_tenant(tid)["name"], "Python renamed")
        self.assertIn(tid, [t["id"] for t in self.client.list_tenants(limit=1000)])
        webhookd.parse_time(t["created"])  # every time parses

    def test_catalogue(self) -> None:
        names = [et["name"] for et in self.client.list_event_types(limit=1)]
        self.assertIn("py.paid", names)
        et, created = self.client.put_event_type("py.temporary", {"description": "gone soon"})
        self.assertTrue(created)
        self.assertEqual(et["description"], "gone soon")
        self.client.delete_event_type("py.temporary")
        self.assertNotIn("py.temporary", [e["name"] for e in self.client.list_event_types()])
        policies = [p["name"] for p in self.client.list_retry_policies()]
        self.assertIn("standard", policies)

    def test_schema_and_status(self) -> None:
        tid = self.tenant()
        schema = {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}
        et, _ = self.client.put_event_type("py.checked", {"description": "with a schema", "status": "deprecated",
                                                          "schema": schema, "example": {"id": "in_1"}})
        self.assertEqual((et["status"], et.get("schema")), ("deprecated", schema))
        self.client.ingest(tid, {"type": "py.checked", "data": {"id": "in_2"}})
        with self.assertRaises(webhookd.Problem) as cm:
            self.client.ingest(tid, {"type": "py.checked", "data": {"id": 2}})
        self.assertProblem(cm.exception, 422, "schema_mismatch", "data/id")
        self.client.put_event_type("py.checked", {"status": "archived"})
        with self.assertRaises(webhookd.Problem) as cm:
            self.client.ingest(tid, {"type": "py.checked", "data": {}})
        self.assertProblem(cm.exception, 422, "event_type_archived", "type")
        self.client.delete_event_type("py.checked")

    def test_endpoint(self) -> None:
        tid = self.tenant()
        ep = self.endpoint(tid, "/ok/endpoint", ["py.paid"])
        self.assertTrue(ep["secret"].startswith("whsec_"))
        self.assertEqual(self.client.get_endpoint(tid, ep["id"])["url"], self.receiver.url + "/ok/endpoint")
        got = self.client.update_endpoint(tid, ep["id"], {"description": "patched",
                                                          "rate_limit": {"per_second": 5}})
        self.assertEqual(got["description"], "patched")
        self.assertEqual(got.get("rate_limit"), {"per_second": 5, "burst": 5})
        self.assertFalse(ep["send_traceparent"])
        got = self.client.update_endpoint(tid, ep["id"], {"send_traceparent": True})
        self.assertTrue(got["send_traceparent"])
        self.assertEqual([e["id"] for e in self.client.list_endpoints(tid)], [ep["id"]])
        v = self.client.verify_endpoint(tid, ep["id"])
        self.assertTrue(v["verified"], v)
        self.client.delete_endpoint(tid, ep["id"])
        with self.assertRaises(webhookd.Problem) as cm:
            self.client.get_endpoint(tid, ep["id"])
        self.assertProblem(cm.exception, 404, "endpoint_not_found", "id")

    def test_ingest(self) -> None:
        tid = self.tenant()
        ep = self.endpoint(tid, "/ok/ingest")
        res = self.client.ingest(tid, {"type": "py.paid", "data": {"amount": 4200, "name": "Zoë"},
                                       "ordering_key": "order_1"})
        self.assertTrue(res["id"].startswith("evt_"))
        self.assertTrue(res["idempotency_key"].startswith("wc_"))
        self.assertFalse(res["replayed"])
        self.assertEqual([d["endpoint_id"] for d in res["deliveries"]], [ep["id"]])
        self.wait_state(tid, res["deliveries"][0]["id"], "succeeded")
        [got] = self.receiver.requests("/ok/ingest", res["id"])
        self.assertTrue(got.signed_by(ep["secret"]))
        env = json.loads(got.body)
        self.assertEqual(env["data"], {"amount": 4200, "name": "Zoë"})
        detail = self.client.get_event(tid, res["id"])
        self.assertEqual(detail["event"], env)
        self.assertEqual(detail["raw_event"], got.body)  # byte for byte, as signed
        self.assertEqual(detail["deliveries"][0]["state"], "succeeded")

    def test_ingest_bytes(self) -> None:
        # Bytes are sent as they are: what the receiver gets keeps every
        # byte of the data but the whitespace between tokens.
        tid = self.tenant()
        self.endpoint(tid, "/ok/bytes")
        data = b'{"n": 12345678901234567890123, "s": "caf\\u00e9 \\/ 1.0"}'
        res = self.client.ingest(tid, b'{"type":"py.paid","data":' + data + b"}")
        self.wait_state(tid, res["deliveries"][0]["id"], "succeeded")
        [got] = self.receiver.requests("/ok/bytes", res["id"])
        self.assertIn(b'"data":{"n":12345678901234567890123,"s":"caf\\u00e9 \\/ 1.0"}', got.body)

    def test_idempotent_repeat(self) -> None:
        tid = self.tenant()
        event: Any = {"type": "py.paid", "data": {"id": "in_1"}}
        first = self.client.ingest(tid, event, idempotency_key="py-key-1")
        again = self.client.ingest(tid, event, idempotency_key="py-key-1")
        self.assertEqual((again["id"], again["replayed"], again["idempotency_key"]),
                         (first["id"], True, "py-key-1"))
        with self.assertRaises(webhookd.Problem) as cm:
            self.client.ingest(tid, {"type": "py.paid", "data": {"id": "in_2"}},
                               idempotency_key="py-key-1")
        self.assertProblem(cm.exception, 409, "idempotency_conflict", "Idempotency-Key")
        self.assertEqual(len(list(self.client.feed(tid))), 1)

    def test_errors(self) -> None:
        tid = self.tenant()
        cases: List[Any] = [
            (lambda: self.client.ingest(tid, {"type": "py.nope", "data": {}}),
             422, "unknown_event_type", "type"),
            (lambda: self.client.create_endpoint(tid, {"url": "not a url", "event_types": ["*"]}),
             422, "invalid_field", "url"),
            (lambda: self.client.ingest(tid, b'{"type":"py.paid","data":{"a":1,"a":2}}'),
             400, "invalid_json", "data"),
            (lambda: self.client.get_tenant(unique("missing")), 404, "tenant_not_found", "tenant"),
            (lambda: self.client.get_delivery(tid, "dlv_missing"), 404, "delivery_not_found", "id"),
            (lambda: list(self.client.list_deliveries(tid, limit=0)), 422, "invalid_field", "limit"),
            (lambda: self.client.skip_delivery(tid, "dlv_missing"), 404, "delivery_not_found", "id"),
        ]
        for call, status, code, field in cases:
            with self.subTest(code=code, field=field):
                with self.assertRaises(webhookd.Problem) as cm:
                    call()
                self.assertProblem(cm.exception, status, code, field)
        stranger = webhookd.Client(server()[0], "not-a-token-of-this-server")
        with self.assertRaises(webhookd.Problem) as cm:
            stranger.get_tenant(tid)
        self.assertProblem(cm.exception, 401, "unauthorized")
        self.assertIsInstance(cm.exception, webhookd.WebhookdError)

    def test_pages(self) -> None:
        tid = self.tenant()
        self.endpoint(tid, "/ok/pages")
        ids = [self.client.ingest(tid, {"type": "py.paid", "data": {"n": i}})["id"] for i in range(7)]
        walked = [d["event_id"] for d in self.client.list_deliveries(tid, limit=2)]
        self.assertEqual(walked, ids[::-1])  # newest first, over four pages
        only = list(self.client.list_deliveries(tid, type="py.failed"))
        self.assertEqual(only, [])
        feed = self.client.feed(tid, limit=3)
        entries = list(feed)
        self.assertEqual([e["event"]["id"] for e in entries], ids)
        self.assertEqual([e["event"]["sequence"] for e in entries], list(range(1, 8)))
        for e in entries:
            self.assertEqual(json.loads(e["raw_event"]), e["event"])
        self.assertEqual(entries[2]["raw_event"], self.client.get_event(tid, ids[2])["raw_event"])
        self.assertEqual(list(feed), [])  # at the end of the log
        late = self.client.ingest(tid, {"type": "py.paid", "data": {"n": 7}})
        self.assertEqual([e["event"]["id"] for e in feed], [late["id"]])
        resumed = self.client.feed(tid, cursor=entries[5]["cursor"])
        self.assertEqual([e["event"]["id"] for e in resumed], [ids[6], late["id"]])

    def test_replay(self) -> None:
        tid = self.tenant()
        self.endpoint(tid, "/ok/replay")
        res = self.client.ingest(tid, {"type": "py.paid", "data": {}})
        did = res["deliveries"][0]["id"]
        self.wait_state(tid, did, "succeeded")
        d = self.client.replay_delivery(tid, did)
        self.assertEqual(d["cycle"], 2)
        self.wait_state(tid, did, "succeeded")
        got = self.receiver.requests("/ok/replay", res["id"])
        self.assertEqual(len(got), 2)
        self.assertEqual(got[0].body, got[1].body)
        self.assertEqual(len(self.client.get_delivery(tid, did)["replays"]), 1)

    def test_dead_letters(self) -> None:
        tid = self.tenant()
        ep = self.endpoint(tid, "/fail/dead")
        start = datetime.datetime.now(UTC) - datetime.timedelta(seconds=5)
        res = self.client.ingest(tid, {"type": "py.failed", "data": {}})
        did = res["deliveries"][0]["id"]
        self.wait_state(tid, did, "dead")
        dead = list(self.client.list_dead_letters(tid))
        self.assertEqual([d["id"] for d in dead], [did])
        self.assertEqual(dead[0].get("last_status"), 400)
        self.assertEqual([d["id"] for d in self.client.list_deliveries(tid, state="dead", status="4xx",
                                                                        endpoint=ep["id"], since=start)], [did])
        task = self.client.replay_dead_letters(tid, start, endpoint=ep["id"])
        self.assertEqual((task["kind"], task["state"], task["params"].get("endpoint")),
                         ("dead_letters.replay", "running", ep["id"]))
        task = self.client.wait_task(task, poll=0.02, timeout=30)
        self.assertEqual((task["state"], task["done"], task["total"]), ("succeeded", 1, 1))
        with self.assertRaises(webhookd.Problem) as cm:
            self.client.skip_delivery(tid, did)
        self.assertProblem(cm.exception, 409, "not_blocking", "id")
        self.wait_state(tid, did, "dead")
        rep = self.client.report(tid)
        self.assertEqual((rep["events"], rep["deliveries"], rep["dead"]), (1, 1, 1))
        total = self.client.report_all(last=10)
        self.assertIn(tid, [r.get("tenant") for r in total["tenants"]])

    def test_rotate(self) -> None:
        tid = self.tenant()
        ep = self.endpoint(tid, "/ok/rotate")
        rot = self.client.rotate_secret(tid, ep["id"], datetime.timedelta(hours=1))
        self.assertNotEqual(rot["secret"], ep["secret"])
        expires = webhookd.parse_time(rot["previous_secret_expires"])
        self.assertGreater(expires, datetime.datetime.now(UTC) + datetime.timedelta(minutes=59))
        revealed = self.client.reveal_secret(tid, ep["id"])
        self.assertEqual(revealed["secret"], rot["secret"])
        self.assertEqual([p["secret"] for p in revealed["previous"]], [ep["secret"]])
        res = self.client.ingest(tid, {"type": "py.paid", "data": {}})
        self.wait_state(tid, res["deliveries"][0]["id"], "succeeded")
        [got] = self.receiver.requests("/ok/rotate", res["id"])
        self.assertEqual(len(got.headers["webhook-signature"].split(" ")), 2)
        self.assertTrue(got.signed_by(ep["secret"]) and got.signed_by(rot["secret"]))
        revoked = self.client.revoke_secret(tid, ep["id"])
        self.assertEqual(self.client.reveal_secret(tid, ep["id"])["previous"], [])
        self.receiver.secrets["/ok/rotate"] = revoked["secret"]
        self.assertEqual(len(self.client.get_endpoint(tid, ep["id"]).get("secret_reveals", [])), 2)

    def test_operational_endpoints(self) -> None:
        path = "/ok/operational/" + unique("op")
        made = self.client.create_operational_endpoint(
            {"url": self.receiver.url + path, "event_types": ["endpoint.created"]})
        self.receiver.secrets[path] = made["secret"]
        self.assertEqual((made["source"], made["disabled"]), ("api", False))
        try:
            self.assertIn(made["id"], [e["id"] for e in self.client.list_operational_endpoints()])
            tid = self.tenant()
            ep = self.endpoint(tid, "/ok/operational-customer")

            def told() -> bool:
                return any(json.loads(r.body)["data"].get("endpoint_id") == ep["id"]
                           for r in self.receiver.requests(path))
            wait_for("endpoint.created", told)
            [got] = [r for r in self.receiver.requests(path)
                     if json.loads(r.body)["data"].get("endpoint_id") == ep["id"]]
            self.assertTrue(got.signed_by(made["secret"]))
            event = json.loads(got.body)
            self.assertEqual((event["type"], event["data"]["tenant"]), ("endpoint.created", tid))
            webhookd.parse_time(event["data"]["at"])
            changed = self.client.update_operational_endpoint(made["id"], {"description": "pager"})
            self.assertEqual(self.client.get_operational_endpoint(made["id"])["description"], "pager")
            self.assertEqual(changed["description"], "pager")
            rot = self.client.rotate_operational_secret(made["id"], 0)
            self.assertNotEqual(rot["secret"], made["secret"])
            self.assertNotIn("previous_secret_expires", rot)
        finally:
            self.client.delete_operational_endpoint(made["id"])
        with self.assertRaises(webhookd.Problem) as e:
            self.client.get_operational_endpoint(made["id"])
        self.assertProblem(e.exception, 404, "endpoint_not_found", "id")

    def test_test_event_and_backfill(self) -> None:
        tid = self.tenant()
        since = datetime.datetime.now(UTC) - datetime.timedelta(seconds=5)
        first = self.client.ingest(tid, {"type": "py.paid", "data": {"before": "the endpoint"}})
        ep = self.endpoint(tid, "/ok/test-event", ["py.paid"])
        sent = self.client.send_test_event(tid, ep["id"])
        self.assertEqual((sent["type"], sent["test"]), ("py.paid", True))
        self.wait_state(tid, sent["deliveries"][0]["id"], "succeeded")
        [got] = self.receiver.requests("/ok/test-event", sent["id"])
        self.assertEqual(json.loads(got.body)["data"], {"id": "in_example"})
        filled = self.client.wait_task(self.client.backfill_endpoint(tid, ep["id"], since),
                                       poll=0.02, timeout=30)
        self.assertEqual((filled["kind"], filled["state"], filled["done"], filled["skipped"]),
                         ("endpoint.backfill", "succeeded", 1, 0))
        self.assertEqual([t["id"] for t in self.client.list_tenant_tasks(tid, limit=1)], [filled["id"]])
        self.assertEqual(self.client.get_tenant_task(tid, filled["id"])["done"], 1)
        with self.assertRaises(webhookd.Problem) as cm:
            self.client.get_tenant_task(tid, "task_nope")
        self.assertProblem(cm.exception, 404, "task_not_found", "id")
        wait_for("the backfilled event", lambda: bool(self.receiver.requests("/ok/test-event", first["id"])))

    def test_tokens_and_portal(self) -> None:
        tid, other = self.tenant(), self.tenant()
        issued = self.client.issue_access_token(tid, datetime.timedelta(hours=1))
        own = webhookd.Client(server()[0], issued["token"])
        self.assertEqual(own.get_tenant(tid)["id"], tid)
        with self.assertRaises(webhookd.Problem) as cm:
            own.get_tenant(other)
        self.assertProblem(cm.exception, 403, "forbidden")
        link = self.client.create_portal_link(tid, 300, "https://app.example/settings")
        self.assertTrue(link["url"].startswith("http"))
        tokens = {t["id"]: t for t in self.client.list_access_tokens(tid)}
        self.assertEqual(tokens[link["id"]].get("purpose"), "portal_link")
        self.assertIn(issued["id"], tokens)
        self.client.revoke_access_token(tid, issued["id"])
        with self.assertRaises(webhookd.Problem) as cm:
            own.get_tenant(tid)
        self.assertProblem(cm.exception, 401, "unauthorized")

    def test_delete_tenant(self) -> None:
        tid = self.tenant()
        self.endpoint(tid, "/fail/delete")
        purge = self.client.delete_tenant(tid, force=True)
        self.assertEqual((purge["kind"], purge.get("tenant"), purge["params"].get("tenant")),
                         ("tenant.purge", None, tid))
        with self.assertRaises(webhookd.Problem) as cm:
            self.client.get_tenant(tid)
        self.assertEqual(cm.exception.status, 404)
        self.assertEqual(self.client.wait_task(purge, poll=0.02, timeout=30)["state"], "succeeded")
        self.assertEqual(self.client.get_task(purge["id"])["id"], purge["id"])
        self.assertIn(purge["id"], [t["id"] for t in self.client.list_tasks(limit=1000)])

    def test_readme_example(self) -> None:
        # The README's example runs as it is, on this server.
        readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
        code = readme.split("```python\n", 1)[1].split("```", 1)[0]
        url, token = server()
        code = code.replace('"http://127.0.0.1:8080"', repr(url))
        code = code.replace('os.environ["WEBHOOKD_TOKEN"]', repr(token))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
        self.assertIn("422 unknown_event_type type", out.getvalue())

    def test_backup(self) -> None:
        # A server on the bbolt file streams its file; one on PostgreSQL
        # has no backup route (pg_dump backs it up), a Problem not_found.
        out = io.BytesIO()
        try:
            n = self.client.backup(out)
        except webhookd.Problem as p:
            self.assertProblem(p, 404, "not_found")
            return
        self.assertEqual(n, len(out.getvalue()))
        self.assertGreater(n, 4096)


if __name__ == "__main__":
    unittest.main()
