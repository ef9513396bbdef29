// Every call of the client against the real server, in the order a sender
// goes: set up, ingest, read what happened, replay, page, follow the feed,
// rotate, hand a tenant its own token and a portal link, back up, tear
// down. Each step is a subtest and needs the ones before it.

import assert from "node:assert/strict";
import { test } from "node:test";

import { type Delivery, type DeliveryState, Problem, type Client } from "../src/index.js";
import { type Receiver, adminClient, needsServer, poll, serverURL, startReceiver, unique } from "./helpers.js";

/** Waits until delivery id of tenant is in one of states, and returns it. */
async function waitState(c: Client, tenant: string, id: string, ...states: DeliveryState[]): Promise<Delivery> {
  return poll(`delivery ${id} to be ${states.join(" or ")}`, async () => {
    const d = await c.deliveries.get(tenant, id);
    return states.includes(d.state) ? d : undefined;
  });
}

/** Asserts that p rejects with a Problem of status and code (and field, when given), and returns it. */
async function rejectsWith(p: Promise<unknown>, status: number, code: string, field?: string): Promise<Problem> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof Problem, `want a Problem, got ${String(err)}`);
    assert.equal(err.status, status, err.message);
    assert.equal(err.code, code, err.message);
    if (field !== undefined) assert.equal(err.field, field, err.message);
    return err;
  }
  assert.fail(`want a ${status} ${code} Problem, got success`);
}

test("every call against the real server", needsServer, async (t) => {
  const c = adminClient();
  const tenant = unique("ts-flow-");
  const ns = unique("ts_");
  const paid = `${ns}.invoice_paid`;
  const voided = `${ns}.invoice_voided`;
  const ordered = `${ns}.order_moved`;
  const receivers: Receiver[] = [];
  t.after(async () => {
    await Promise.all(receivers.map((r) => r.close()));
  });
  const receiver = async (...args: Parameters<typeof startReceiver>) => {
    const r = await startReceiver(...args);
    receivers.push(r);
    return r;
  };
  const hourAgo = new Date(Date.now() - 3600_000).toISOString();

  await t.test("health and ready", async () => {
    assert.deepEqual(await c.health(), { status: "ok" });
    assert.deepEqual(await c.ready(), { status: "ready" });
  });

  await t.test("a tenant: created, then updated", async () => {
    const made = await c.tenants.put(tenant, { name: "Acme", environment: "live" });
    assert.equal(made.created, true);
    assert.equal(made.tenant.id, tenant);
    assert.equal(made.tenant.environment, "live");
    assert.equal(made.tenant.retry_policy, "standard");
    const again = await c.tenants.put(tenant, { name: "Acme Inc" });
    assert.equal(again.created, false);
    const got = await c.tenants.get(tenant);
    assert.equal(got.name, "Acme Inc");
    const ids: string[] = [];
    for await (const tn of c.tenants.list({ limit: 1000 })) ids.push(tn.id);
    assert.ok(ids.includes(tenant), "the tenant is listed");
  });

  await t.test("the catalogue and the retry policies", async () => {
    const et = await c.eventTypes.put(paid, { description: "An invoice was paid." });
    assert.equal(et.created, true);
    assert.equal(et.eventType.name, paid);
    assert.equal((await c.eventTypes.put(voided, { description: "An invoice was voided." })).created, true);
    assert.equal((await c.eventTypes.put(voided, { description: "An invoice was voided, for good." })).created, false);
    await c.eventTypes.put(ordered);
    const mine = (await c.eventTypes.list({ limit: 2 }).all()).filter((e) => e.name.startsWith(`${ns}.`));
    assert.deepEqual(
      mine.map((e) => e.name),
      [paid, voided, ordered].sort(),
    );
    const policies = (await c.retryPolicies.list().all()).map((p) => p.name);
    assert.ok(policies.includes("standard") && policies.includes("extended"), policies.join());
  });

  let ok!: Receiver, bad!: Receiver;
  let okID = "", badID = "", okSecret = "";
  await t.test("endpoints: one takes deliveries, one refuses them", async () => {
    ok = await receiver();
    bad = await receiver(() => ({ status: 400, headers: { "content-type": "text/plain; charset=utf-8" }, body: "no thanks" }));
    const e1 = await c.endpoints.create(tenant, { url: `${ok.url}/ok`, event_types: [paid, voided], description: "takes them" });
    assert.match(e1.secret, /^whsec_/);
    assert.equal(e1.tenant, tenant);
    assert.equal(e1.environment, "live");
    ok.secrets = [e1.secret];
    okID = e1.id;
    okSecret = e1.secret;
    const e2 = await c.endpoints.create(tenant, { url: `${bad.url}/refuses`, event_types: [paid] });
    bad.secrets = [e2.secret];
    badID = e2.id;
    assert.equal((await c.endpoints.list(tenant).all()).length, 2);
    const upd = await c.endpoints.update(tenant, okID, { description: "takes them all" });
    assert.equal(upd.description, "takes them all");
    assert.equal(upd.url, e1.url);
    const got = await c.endpoints.get(tenant, okID);
    assert.deepEqual(got.event_types, [paid, voided]);
    assert.equal(got.ordering, "none");
  });

  await t.test("errors: a Problem with its code and field", async () => {
    const unknown = await rejectsWith(c.events.ingest(tenant, { type: `${ns}.nope`, data: {} }), 422, "unknown_event_type", "type");
    assert.match(unknown.message, /^webhookd: 422 unknown_event_type: .* \(field type\)$/);
    await rejectsWith(c.endpoints.create(tenant, { url: "ftp://example.com/", event_types: [paid] }), 422, "invalid_field", "url");
    await rejectsWith(c.tenants.get(unique("ts-none-")), 404, "tenant_not_found");
    await rejectsWith(c.endpoints.get(tenant, "ep_none"), 404, "endpoint_not_found");
    await rejectsWith(c.deliveries.list(tenant, { status: "4XX" as "4xx" }).all(), 422, "invalid_field", "status");
    await rejectsWith(c.events.ingest(tenant, { type: paid, data: {}, api_version: "x".repeat(300) }), 422, "invalid_field", "api_version");
    const stranger = adminClient({ token: "not-a-token-of-this-server" });
    const p = await rejectsWith(stranger.tenants.get(tenant), 401, "unauthorized");
    assert.equal(p.type, "urn:webhookd:problem:unauthorized");
  });

  await t.test("an event type's schema and status", async () => {
    // A tenant of its own, with no endpoint: the steps below count the flow tenant's events.
    const own = unique("ts-schema-");
    await c.tenants.put(own, { name: "Schemas" });
    const checked = `${ns}.order_checked`;
    const schema = { type: "object", required: ["id"], properties: { id: { type: "string" } } };
    const { eventType } = await c.eventTypes.put(checked, { description: "with a schema", status: "deprecated", schema, example: { id: "o_1" } });
    assert.equal(eventType.status, "deprecated");
    assert.deepEqual(eventType.schema, schema);
    await c.events.ingest(own, { type: checked, data: { id: "o_2" } });
    await rejectsWith(c.events.ingest(own, { type: checked, data: { id: 2 } }), 422, "schema_mismatch", "data/id");
    await c.eventTypes.put(checked, { status: "archived" });
    await rejectsWith(c.events.ingest(own, { type: checked, data: {} }), 422, "event_type_archived", "type");
    await c.eventTypes.delete(checked);
    await c.tenants.delete(own);
  });

  let eventID = "", okDelivery = "", deadID = "", idemKey = "";
  await t.test("ingest, and an idempotent repeat", async () => {
    const res = await c.events.ingest(tenant, { type: paid, data: { invoice: "in_1", amount: 1.5, note: "é\u2028" } });
    assert.match(res.id, /^evt_/);
    assert.equal(res.deliveries.length, 2);
    assert.match(res.idempotencyKey, /^wc_[0-9a-f]{32}$/);
    assert.equal(res.replayed, false);
    eventID = res.id;
    idemKey = res.idempotencyKey;
    okDelivery = res.deliveries.find((d) => d.endpoint_id === okID)?.id ?? "";
    deadID = res.deliveries.find((d) => d.endpoint_id === badID)?.id ?? "";
    const again = await c.events.ingest(tenant, { type: paid, data: { invoice: "in_1", amount: 1.5, note: "é\u2028" } }, { idempotencyKey: idemKey });
    assert.equal(again.id, eventID);
    assert.equal(again.replayed, true);
    await rejectsWith(c.events.ingest(tenant, { type: paid, data: { invoice: "in_2" } }, { idempotencyKey: idemKey }), 409, "idempotency_conflict");
  });

  await t.test("the delivery: signed, and the envelope's exact bytes", async () => {
    const d = await waitState(c, tenant, okDelivery, "succeeded");
    assert.equal(d.attempts.length, 1);
    assert.equal(d.attempts[0]?.status, 204);
    assert.equal(d.attempts[0]?.outcome, "success");
    const got = ok.got.find((r) => r.headers["webhook-id"] === eventID);
    assert.ok(got, "the receiver got the event");
    assert.deepEqual(got.verifiedWith, [okSecret], "signed with the endpoint's secret");
    const ev = await c.events.get(tenant, eventID);
    assert.equal(ev.event.id, eventID);
    assert.equal(ev.deliveries.length, 2);
    assert.equal(ev.rawEvent, got.body.toString("utf8"), "rawEvent is the body the receiver got, byte for byte");
    assert.deepEqual(ev.event.data, { invoice: "in_1", amount: 1.5, note: "é\u2028" });
  });

  await t.test("the delivery log, filtered", async () => {
    const dead = await waitState(c, tenant, deadID, "dead");
    assert.equal(dead.attempts[0]?.outcome, "permanent");
    assert.ok(dead.dead_at);
    const filtered = await c.deliveries
      .list(tenant, { state: "dead", type: paid, endpoint: badID, since: hourAgo, until: new Date(Date.now() + 3600_000).toISOString() })
      .all();
    assert.deepEqual(
      filtered.map((x) => x.id),
      [deadID],
    );
    const by4xx = await c.deliveries.list(tenant, { status: "4xx" }).all();
    assert.deepEqual(
      by4xx.map((x) => x.id),
      [deadID],
    );
    assert.equal(by4xx[0]?.attempts[0]?.response_headers?.["Content-Type"], "text/plain; charset=utf-8");
    assert.equal(by4xx[0]?.attempts[0]?.response, "no thanks");
    assert.deepEqual(await c.deliveries.list(tenant, { status: "none" }).all(), []);
  });

  await t.test("dead letters: listed, replayed one by one and by range", async () => {
    assert.deepEqual(
      (await c.deadLetters.list(tenant).all()).map((x) => x.id),
      [deadID],
    );
    const rep = await c.deliveries.replay(tenant, deadID);
    assert.equal(rep.cycle, 2);
    assert.equal(rep.replays[0]?.by, "admin");
    const again = await waitState(c, tenant, deadID, "dead");
    assert.equal(again.cycle, 2);
    const replay = await c.deadLetters.replay(tenant, { since: hourAgo, endpoint: badID });
    assert.equal(replay.kind, "dead_letters.replay");
    const replayed = await c.tasks.wait(replay, { pollMs: 20 });
    assert.deepEqual([replayed.state, replayed.done, replayed.total], ["succeeded", 1, 1]);
    const third = await waitState(c, tenant, deadID, "dead");
    assert.equal(third.cycle, 3);
  });

  const pagedIDs: string[] = [];
  await t.test("pages: every delivery once, newest first, one page at a time", async () => {
    for (let i = 0; i < 9; i++) {
      const res = await c.events.ingest(tenant, { type: voided, data: { n: i } });
      pagedIDs.push(res.deliveries[0]?.id ?? "");
    }
    const want = [...pagedIDs].reverse();
    const walked: string[] = [];
    for await (const d of c.deliveries.list(tenant, { type: voided, limit: 4 })) walked.push(d.id);
    assert.deepEqual(walked, want);
    const sizes: number[] = [];
    for await (const p of c.deliveries.list(tenant, { type: voided, limit: 4 }).pages()) sizes.push(p.data.length);
    assert.deepEqual(sizes, [4, 4, 1]);
    // The loop of one's own: next_cursor goes back in as the cursor, no cast.
    const own: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await c.deliveries.page(tenant, { type: voided, limit: 4, cursor });
      own.push(...page.data.map((d) => d.id));
      cursor = page.next_cursor;
      pages++;
    } while (cursor !== null && pages < 10);
    assert.deepEqual(own, want);
    // A walk that starts after a cursor the server gave.
    const first = await c.deliveries.page(tenant, { type: voided, limit: 4 });
    const rest = await c.deliveries.list(tenant, { type: voided, limit: 4, cursor: first.next_cursor }).all();
    assert.deepEqual(
      rest.map((d) => d.id),
      want.slice(4),
    );
  });

  let feedCursor = "";
  await t.test("the feed: the log in order, then resumed from its cursor", async () => {
    const feed = c.events.feed(tenant, { limit: 3 });
    const all = await feed.all();
    assert.equal(all.length, 10);
    assert.equal(all[0]?.event.id, eventID);
    assert.equal(all[0]?.event.sequence, 1);
    assert.equal(feed.cursor, all[9]?.cursor);
    for (const e of all) assert.deepEqual(JSON.parse(e.rawEvent), e.event);
    assert.equal(all[0]?.rawEvent, (await c.events.get(tenant, eventID)).rawEvent);
    feedCursor = feed.cursor;
    const res = await c.events.ingest(tenant, { type: voided, data: { last: true }, ordering_key: "in_1", channels: ["eu"] });
    const next = await c.events.feed(tenant, { cursor: feedCursor }).all();
    assert.deepEqual(
      next.map((e) => [e.event.id, e.event.sequence, e.event.ordering_key, e.channels]),
      [[res.id, 11, "in_1", ["eu"]]],
    );
    // Walking the same Feed again goes on from where it stopped.
    assert.deepEqual(
      (await feed.all()).map((e) => e.event.id),
      [res.id],
    );
    feedCursor = feed.cursor;
    assert.deepEqual(
      (await c.events.feed(tenant, { channel: "eu" }).all()).map((e) => e.event.id),
      [res.id],
    );
  });

  await t.test("a test event: the type's example, to one endpoint, marked test", async () => {
    const et = await c.eventTypes.put(paid, { description: "An invoice was paid.", example: { invoice: "in_example" } });
    assert.deepEqual(et.eventType.example, { invoice: "in_example" });
    const te = await c.endpoints.sendTestEvent(tenant, okID);
    assert.equal(te.type, paid);
    assert.equal(te.test, true);
    assert.equal(te.deliveries.length, 1);
    assert.equal(te.deliveries[0]?.endpoint_id, okID);
    const d = await waitState(c, tenant, te.deliveries[0]?.id ?? "", "succeeded");
    assert.equal(d.test, true);
    const got = ok.got.find((r) => r.headers["webhook-id"] === te.id);
    assert.deepEqual(got && JSON.parse(got.body.toString()).data, { invoice: "in_example" });
    const fed = await c.events.feed(tenant, { cursor: feedCursor }).all();
    assert.deepEqual(
      fed.map((e) => [e.event.id, e.test]),
      [[te.id, true]],
    );
    await rejectsWith(c.endpoints.sendTestEvent(tenant, okID, { type: ordered }), 422, "invalid_field");
  });

  await t.test("a secret rotated: both keys sign through the grace window", async () => {
    const rot = await c.endpoints.rotateSecret(tenant, okID, { grace: "1h" });
    assert.notEqual(rot.secret, okSecret);
    const expires = Date.parse(rot.previous_secret_expires ?? "");
    assert.ok(expires > Date.now() + 59 * 60_000 && expires <= Date.now() + 61 * 60_000, rot.previous_secret_expires);
    const shown = await c.endpoints.revealSecret(tenant, okID);
    assert.equal(shown.secret, rot.secret);
    assert.deepEqual(
      shown.previous.map((p) => p.secret),
      [okSecret],
    );
    const ep = await c.endpoints.get(tenant, okID);
    assert.equal(ep.secret_reveals?.length, 1);
    assert.equal(ep.secret_reveals?.[0]?.by, "admin");
    ok.secrets = [rot.secret, okSecret];
    const res = await c.events.ingest(tenant, { type: paid, data: { rotated: true } });
    await waitState(c, tenant, res.deliveries.find((d) => d.endpoint_id === okID)?.id ?? "", "succeeded");
    const got = ok.got.find((r) => r.headers["webhook-id"] === res.id);
    assert.deepEqual(got?.verifiedWith, [rot.secret, okSecret], "signed with the new key and the old one");
    const now = await c.endpoints.rotateSecret(tenant, okID, { grace_seconds: 0 });
    assert.equal(now.previous_secret_expires, undefined);
    const revoked = await c.endpoints.revokeSecret(tenant, okID);
    assert.match(revoked.secret, /^whsec_/);
    assert.notEqual(revoked.secret, now.secret);
    ok.secrets = [revoked.secret];
  });

  await t.test("endpoint verification: answered, and not", async () => {
    const v = await c.endpoints.verify(tenant, okID);
    assert.equal(v.verified, true, v.reason);
    assert.ok(v.endpoint.verified);
    const silent = await receiver();
    const e = await c.endpoints.create(tenant, { url: `${silent.url}/silent`, event_types: [ordered] });
    const not = await c.endpoints.verify(tenant, e.id);
    assert.equal(not.verified, false);
    assert.ok(not.reason);
    await c.endpoints.delete(tenant, e.id);
  });

  await t.test("an endpoint's settings: rate limit, headers, channels, traceparent, disabled", async () => {
    const upd = await c.endpoints.update(tenant, okID, {
      rate_limit: { per_second: 50 },
      headers: { Authorization: "Bearer a-long-receiver-credential-0123456789" },
      channels: ["eu", "us"],
      send_traceparent: true,
    });
    assert.deepEqual(upd.rate_limit, { per_second: 50, burst: 50 });
    assert.equal(upd.send_traceparent, true);
    assert.equal(upd.headers?.["Authorization"], "Bearer ••••");
    assert.deepEqual(upd.channels, ["eu", "us"]);
    assert.equal((await c.endpoints.revealSecret(tenant, okID)).headers["Authorization"], "Bearer a-long-receiver-credential-0123456789");
    const off = await c.endpoints.update(tenant, okID, { disabled: true });
    assert.equal(off.disabled, true);
    const on = await c.endpoints.update(tenant, okID, { disabled: false, rate_limit: null, headers: null, channels: [], send_traceparent: false });
    assert.equal(on.disabled, false);
    assert.equal(on.send_traceparent, false);
    assert.equal(on.rate_limit, undefined);
    assert.equal(on.channels, undefined);
  });

  await t.test("a backfill: an endpoint made after its events gets them once", async () => {
    const late = await receiver();
    const e = await c.endpoints.create(tenant, { url: `${late.url}/late`, event_types: [voided] });
    late.secrets = [e.secret];
    const b = await c.tasks.wait(await c.endpoints.backfill(tenant, e.id, { since: hourAgo }), { pollMs: 20 });
    assert.deepEqual([b.kind, b.state, b.done, b.skipped], ["endpoint.backfill", "succeeded", 10, 0]);
    const again = await c.tasks.wait(await c.endpoints.backfill(tenant, e.id, { since: hourAgo }), { pollMs: 20 });
    assert.equal(again.done, 0);
    assert.equal(again.skipped, 10);
    assert.deepEqual((await c.tasks.listOfTenant(tenant, { limit: 1 }).all()).slice(0, 2).map((x) => x.id), [again.id, b.id]);
    assert.equal((await c.tasks.getOfTenant(tenant, b.id)).done, 10);
    assert.equal((await c.tasks.get(b.id)).id, b.id);
    await poll("the late endpoint to get 10 events", async () => (late.got.length >= 10 ? true : undefined));
    assert.ok(late.got.every((r) => r.verifiedWith.length === 1));
    const made = await c.deliveries.list(tenant, { endpoint: e.id }).all();
    assert.equal(made.length, 10);
    assert.equal(made[0]?.backfill?.by, "admin");
    await c.endpoints.delete(tenant, e.id);
  });

  await t.test("an ordered line blocked by its dead head, then skipped", async () => {
    const line = await receiver((_r, n) => (n === 1 ? { status: 422 } : { status: 204 }));
    const e = await c.endpoints.create(tenant, { url: `${line.url}/line`, event_types: [ordered], ordering: "key", on_dead: "block" });
    line.secrets = [e.secret];
    const first = await c.events.ingest(tenant, { type: ordered, data: { step: 1 }, ordering_key: "order_1" });
    const second = await c.events.ingest(tenant, { type: ordered, data: { step: 2 }, ordering_key: "order_1" });
    const head = first.deliveries[0]?.id ?? "";
    const behind = second.deliveries[0]?.id ?? "";
    await waitState(c, tenant, head, "dead");
    const waiting = await waitState(c, tenant, behind, "waiting");
    assert.equal(waiting.waiting_behind, head);
    await rejectsWith(c.deliveries.skip(tenant, behind), 409, "not_blocking");
    const skipped = await c.deliveries.skip(tenant, head);
    assert.equal(skipped.skips?.[0]?.by, "admin");
    const done = await waitState(c, tenant, behind, "succeeded");
    assert.equal(done.line, "key:order_1");
    await c.endpoints.delete(tenant, e.id);
  });

  await t.test("the reports: this tenant's and every tenant's", async () => {
    const r = await c.reports.get(tenant, { last: 100 });
    assert.equal(r.tenant, tenant);
    assert.equal(r.events, 15);
    assert.ok(r.checks.length > 0);
    for (const check of r.checks) assert.ok(check.ok, `${check.name}: ${check.note ?? ""}`);
    const all = await c.reports.all({ last: 100 });
    assert.ok(all.tenants.some((x) => x.tenant === tenant));
    assert.ok(all.total.events >= r.events);
  });

  await t.test("a tenant's own token: its routes only, until revoked", async () => {
    const tok = await c.accessTokens.issue(tenant, { ttl: "1h" });
    assert.match(tok.token, /^whk_t_/);
    assert.equal(Date.parse(tok.expires) - Date.parse(tok.created), 3600_000);
    const tc = adminClient({ token: tok.token });
    assert.equal((await tc.tenants.get(tenant)).id, tenant);
    await rejectsWith(tc.reports.all(), 403, "forbidden");
    const listed = await c.accessTokens.list(tenant).all();
    assert.deepEqual(
      listed.map((x) => [x.id, x.revoked]),
      [[tok.id, undefined]],
    );
    await c.accessTokens.revoke(tenant, tok.id);
    await rejectsWith(tc.tenants.get(tenant), 401, "unauthorized");
  });

  await t.test("a portal link: a one-time console URL, listed with the tokens", async () => {
    const link = await c.portalLinks.create(tenant, { ttl_seconds: 300, return_url: "https://app.example.com/hooks" });
    assert.ok(link.url.startsWith(`${serverURL()}/console/portal/whk_t_`), link.url);
    assert.equal(link.return_url, "https://app.example.com/hooks");
    assert.ok(Date.parse(link.expires) <= Date.now() + 300_000);
    const tokens = await c.accessTokens.list(tenant).all();
    assert.equal(tokens.find((x) => x.id === link.id)?.purpose, "portal_link");
    await rejectsWith(c.portalLinks.create(tenant, { ttl: "2h" }), 422, "invalid_field", "ttl");
  });

  await t.test("a backup: the database, streamed whole", async () => {
    try {
      let n = 0;
      for await (const chunk of await c.admin.backup()) n += chunk.byteLength;
      assert.ok(n > 0, "the backup is not empty");
    } catch (err) {
      // A server without a backup source (the postgres driver backs up
      // with pg_dump) answers not_found: the call still went through.
      if (!Problem.is(err, "not_found")) throw err;
      t.diagnostic(`backup: ${err.message}`);
    }
  });

  await t.test("an aborted call rejects with the signal's reason", async () => {
    const ac = new AbortController();
    ac.abort(new Error("changed my mind"));
    await assert.rejects(c.tenants.get(tenant, { signal: ac.signal }), /changed my mind/);
  });

  await t.test("tear down: endpoint, event type, tenant", async () => {
    await c.endpoints.delete(tenant, badID);
    await rejectsWith(c.endpoints.get(tenant, badID), 404, "endpoint_not_found");
    await c.eventTypes.delete(ordered);
    await rejectsWith(c.events.ingest(tenant, { type: ordered, data: {} }), 422, "unknown_event_type", "type");
    const purge = await c.tenants.delete(tenant, { force: true });
    assert.equal(purge.kind, "tenant.purge");
    assert.equal((await c.tasks.wait(purge, { pollMs: 20 })).state, "succeeded");
    assert.ok((await c.tasks.list({ limit: 1000 }).all()).some((x) => x.id === purge.id));
    await rejectsWith(c.tenants.get(tenant), 404, "tenant_not_found").catch(async () => {
      await rejectsWith(c.tenants.get(tenant), 409, "tenant_deleting");
    });
  });
});
