// Retries: a proxy in front of the real server answers some requests
// with a 429 or 503 (after letting the server handle them, for the case
// idempotency keys exist for) and counts what the client sends.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";

import { Client, Problem, WebhookdError } from "../src/index.js";
import { type Proxy, adminClient, firstOnly, needsServer, startProxy, startReceiver, unique } from "./helpers.js";

test("retries on 429 and 503", needsServer, async (t) => {
  const admin = adminClient();
  const tenant = unique("ts-retry-");
  const putTenant = unique("ts-retry-"); // made by a retried PUT
  const type = `${unique("ts_")}.invoice_paid`;
  const putType = `${unique("ts_")}.invoice_voided`; // made by a retried PUT
  const rc = await startReceiver();
  const proxies: Proxy[] = [];
  t.after(async () => {
    await Promise.all([rc.close(), ...proxies.map((p) => p.close())]);
    await admin.tenants.delete(tenant, { force: true });
    await admin.eventTypes.delete(type);
    // Made by the cases that retry a PUT: none when such a case failed.
    const ignoreNotFound = (err: unknown) => {
      if (!(err instanceof Problem && err.status === 404)) throw err;
    };
    await admin.tenants.delete(putTenant, { force: true }).catch(ignoreNotFound);
    await admin.eventTypes.delete(putType).catch(ignoreNotFound);
  });
  await admin.tenants.put(tenant);
  await admin.eventTypes.put(type);
  const ep = await admin.endpoints.create(tenant, { url: `${rc.url}/ok`, event_types: [type] });
  const proxy = async (...args: Parameters<typeof startProxy>) => {
    const p = await startProxy(...args);
    proxies.push(p);
    return p;
  };
  const wantProblem = (status: number, code: string) => (err: unknown) => {
    assert.ok(err instanceof Problem, String(err));
    assert.equal(err.status, status);
    assert.equal(err.code, code);
    return true;
  };

  // The waits are seconds: the cases run at once.
  const opts = { concurrency: true };

  await t.test("the retry policy", opts, async (t) => {
    const cases: Promise<void>[] = [];
    cases.push(t.test("an ingest the server stored but whose answer was a 503: retried after Retry-After with the same key, one event", async () => {
      const p = await proxy(firstOnly({ status: 503, retryAfter: "1", forward: true }));
      const c = adminClient({}, p.url);
      const start = Date.now();
      const res = await c.events.ingest(tenant, { type, data: { n: 1 } });
      assert.ok(Date.now() - start >= 1000, `retried after ${Date.now() - start} ms, want the Retry-After of 1 s`);
      assert.equal(p.got.length, 2);
      const [k1, k2] = p.got.map((r) => r.headers["idempotency-key"]);
      assert.ok(k1 !== undefined && k1 === k2 && k1 === res.idempotencyKey, `keys ${String(k1)}, ${String(k2)}, result ${res.idempotencyKey}`);
      assert.equal(res.replayed, true, "the retry is answered as a replay");
      const events = await admin.events.feed(tenant).all();
      assert.deepEqual(
        events.map((e) => e.event.id),
        [res.id],
      );
    }));

    cases.push(t.test("a GET after a 429: retried, with the token and User-Agent each time", async () => {
      const p = await proxy(firstOnly({ status: 429, retryAfter: "1" }));
      const c = adminClient({ userAgent: "reconciler/1.2" }, p.url);
      const start = Date.now();
      assert.equal((await c.tenants.get(tenant)).id, tenant);
      assert.ok(Date.now() - start >= 1000);
      assert.equal(p.got.length, 2);
      for (const r of p.got) {
        assert.equal(r.headers["user-agent"], "reconciler/1.2");
        assert.match(r.headers["authorization"] ?? "", /^Bearer .{16,}/);
      }
    }));

    cases.push(t.test("a Retry-After as an HTTP date", async () => {
      const p = await proxy(firstOnly({ status: 503, retryAfter: new Date(Date.now() + 1500).toUTCString() }));
      const c = adminClient({}, p.url);
      assert.equal((await c.tenants.get(tenant)).id, tenant);
      assert.equal(p.got.length, 2);
    }));

    cases.push(t.test("a 503 without Retry-After: retried after a second", async () => {
      const p = await proxy(firstOnly({ status: 503 }));
      const c = adminClient({}, p.url);
      const start = Date.now();
      assert.equal((await c.tenants.get(tenant)).id, tenant);
      assert.ok(Date.now() - start >= 1000);
      assert.equal(p.got.length, 2);
    }));

    // PUT and DELETE are idempotent (RFC 9110 §9.2.2): repeated as a GET is.
    cases.push(t.test("a DELETE after a 503: retried after Retry-After", async () => {
      const gone = unique("ts-retry-");
      await admin.tenants.put(gone);
      const p = await proxy(firstOnly({ status: 503, retryAfter: "1" }));
      const c = adminClient({}, p.url);
      const start = Date.now();
      const task = await c.tenants.delete(gone, { force: true });
      assert.ok(Date.now() - start >= 1000, `retried after ${Date.now() - start} ms, want the Retry-After of 1 s`);
      assert.equal(task.kind, "tenant.purge");
      assert.equal(p.got.length, 2);
      await assert.rejects(admin.tenants.get(gone), (err: unknown) => {
        assert.ok(err instanceof Problem && (err.code === "tenant_not_found" || err.code === "tenant_deleting"), String(err));
        return true;
      });
    }));

    cases.push(t.test("a PUT the server did but whose answer was a 503: retried, and reports an update", async () => {
      const p = await proxy(firstOnly({ status: 503, retryAfter: "1", forward: true }));
      const c = adminClient({}, p.url);
      const { tenant: got, created } = await c.tenants.put(putTenant, { name: "Put twice" });
      assert.equal(got.id, putTenant);
      assert.equal(got.name, "Put twice");
      assert.equal(created, false, "the repeat found what the lost answer created");
      assert.equal(p.got.length, 2);
    }));

    cases.push(t.test("a PUT of an event type after a 429: retried", async () => {
      const p = await proxy(firstOnly({ status: 429, retryAfter: "1" }));
      const c = adminClient({}, p.url);
      const { eventType, created } = await c.eventTypes.put(putType);
      assert.equal(eventType.name, putType);
      assert.equal(created, true);
      assert.equal(p.got.length, 2);
    }));

    cases.push(t.test("a POST that creates is sent once", async () => {
      const p = await proxy(firstOnly({ status: 503, retryAfter: "1" }));
      const c = adminClient({}, p.url);
      await assert.rejects(c.endpoints.create(tenant, { url: `${rc.url}/ok`, event_types: [type] }), (err) => {
        wantProblem(503, "unavailable")(err);
        assert.equal((err as Problem).retryAfterMs, 1000);
        return true;
      });
      assert.equal(p.got.length, 1);
    }));

    cases.push(t.test("a PATCH is sent once", async () => {
      const p = await proxy(firstOnly({ status: 503, retryAfter: "1" }));
      const c = adminClient({}, p.url);
      await assert.rejects(c.endpoints.update(tenant, ep.id, { description: "patched" }), wantProblem(503, "unavailable"));
      assert.equal(p.got.length, 1);
    }));

    cases.push(t.test("attempts run out at maxAttempts", async () => {
      const p = await proxy(() => ({ status: 503, retryAfter: "0" }));
      const c = adminClient({ maxAttempts: 2 }, p.url);
      await assert.rejects(c.tenants.get(tenant), wantProblem(503, "unavailable"));
      assert.equal(p.got.length, 2);
      const once = adminClient({ maxAttempts: 1 }, p.url);
      await assert.rejects(once.tenants.get(tenant), wantProblem(503, "unavailable"));
      assert.equal(p.got.length, 3);
      const dflt = adminClient({}, p.url);
      await assert.rejects(dflt.tenants.get(tenant), wantProblem(503, "unavailable"));
      assert.equal(p.got.length, 6, "3 attempts by default");
    }));

    cases.push(t.test("a wait longer than maxRetryWaitMs is not made", async () => {
      const p = await proxy(firstOnly({ status: 429, retryAfter: "120" }));
      const c = adminClient({ maxRetryWaitMs: 60_000 }, p.url);
      await assert.rejects(c.tenants.get(tenant), (err) => {
        wantProblem(429, "unavailable")(err);
        assert.equal((err as Problem).retryAfterMs, 120_000);
        return true;
      });
      assert.equal(p.got.length, 1);
    }));

    cases.push(t.test("the signal aborts the wait", async () => {
      const p = await proxy(firstOnly({ status: 503, retryAfter: "30" }));
      const c = adminClient({}, p.url);
      const start = Date.now();
      // Aborted once the first attempt has its 503, so that the signal
      // ends the 30 s wait and not the attempt (a timer of a fixed
      // length could fire before a busy machine made the attempt).
      const ac = new AbortController();
      const call = c.tenants.get(tenant, { signal: ac.signal });
      for (let i = 0; i < 1000 && p.got.length === 0; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(p.got.length, 1, "the first attempt reached the server");
      await new Promise((r) => setTimeout(r, 50)); // its answer read: the client waits now
      ac.abort();
      await assert.rejects(call, (err: unknown) => {
        assert.equal((err as Error).name, "AbortError", String(err));
        return true;
      });
      assert.ok(Date.now() - start < 10_000, "the wait ended with the signal");
      assert.equal(p.got.length, 1);
    }));

    cases.push(t.test("an answer that is not problem+json is a Problem without a code", async () => {
      const p = await proxy(firstOnly({ status: 502, plain: true }));
      const c = adminClient({}, p.url);
      await assert.rejects(c.tenants.get(tenant), (err: unknown) => {
        wantProblem(502, "")(err);
        assert.equal((err as Problem).detail, "bad gateway");
        assert.equal((err as Problem).title, "Bad Gateway");
        return true;
      });
    }));
    await Promise.all(cases);
  });
});

test("an attempt without an answer within timeoutMs is a WebhookdError", async (t) => {
  // A server that takes requests and never answers.
  const silent = createServer(() => {});
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    silent.close();
    silent.closeAllConnections();
  });
  const c = new Client(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, { timeoutMs: 200, maxAttempts: 1 });
  const start = Date.now();
  await assert.rejects(c.tenants.get("acme"), (err: unknown) => {
    assert.ok(err instanceof WebhookdError, String(err));
    assert.equal(err.message, "webhookd: GET /v1/tenants/acme: no answer within 200 ms");
    return true;
  });
  assert.ok(Date.now() - start < 5000);
});
