// The examples run against the real server, and the README's example is
// the quickstart's.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";

import { catchUp } from "../examples/feed.js";
import { send } from "../examples/errors.js";
import { deadLetterIDs, deadLetters, deadLettersByPage } from "../examples/pages.js";
import { quickstart } from "../examples/quickstart.js";
import { adminClient, needsServer, poll, serverURL, server, startReceiver, unique } from "./helpers.js";

test("the README's example is the quickstart's", () => {
  const readme = readFileSync(resolve("README.md"), "utf8");
  const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(block, "README.md has a ts example");
  const example = readFileSync(resolve("examples/quickstart.ts"), "utf8");
  for (const line of block.split("\n").map((l) => l.trim())) {
    if (line === "" || line.startsWith("import ") || line.startsWith("//")) continue;
    assert.ok(example.includes(line), `examples/quickstart.ts lacks the README's line: ${line}`);
  }
});

test("the examples against the real server", needsServer, async (t) => {
  const c = adminClient();
  const rc = await startReceiver(() => ({ status: 500 })); // every delivery dies
  t.after(() => rc.close());

  await t.test("quickstart", async () => {
    const id = await quickstart(serverURL(), server?.token, `${rc.url}/hooks`);
    assert.match(id, /^evt_/);
    assert.equal((await c.events.get("acme", id)).event.type, "invoice.paid");
  });

  const tenant = unique("ts-examples-");
  const type = `${unique("ts_")}.invoice_paid`;
  await c.tenants.put(tenant);
  await c.eventTypes.put(type);
  await c.endpoints.create(tenant, { url: `${rc.url}/dies`, event_types: [type] });
  t.after(async () => {
    await c.tenants.delete(tenant, { force: true });
    await c.eventTypes.delete(type);
  });

  await t.test("errors", async () => {
    assert.match(await send(serverURL(), server?.token, tenant, type, { n: 1 }), /^sent as evt_/);
    assert.match(await send(serverURL(), server?.token, tenant, type, { n: 1 }), /^already sent as evt_/);
    assert.equal(await send(serverURL(), server?.token, tenant, `${type}_nope`, {}), `add ${type}_nope to the catalogue first (field type)`);
    assert.equal(await send(serverURL(), server?.token, tenant, type, { n: 2 }), "refused: 409 idempotency_conflict");
    assert.match(await send(serverURL(), "wrong-token-0123456789", tenant, type, {}), /^refused: 401 unauthorized$/);
    assert.match(await send("http://127.0.0.1:1", undefined, tenant, type, {}), /^unreachable: webhookd: POST /);
  });

  await t.test("pages", async () => {
    for (let i = 0; i < 4; i++) await c.events.ingest(tenant, { type, data: { i } });
    const all = await poll("5 dead letters", async () => {
      const dead = await deadLetters(c, tenant);
      return dead.length === 5 ? dead : undefined;
    });
    const ids = all.map((d) => d.id);
    assert.deepEqual(
      (await deadLettersByPage(c, tenant)).map((d) => d.id),
      ids,
    );
    assert.deepEqual((await deadLetterIDs(c, tenant, 2)).sort(), [...ids].sort());
  });

  await t.test("feed", async () => {
    const first = await catchUp(c, tenant, undefined);
    assert.equal(first.ids.length, 5);
    assert.ok(first.sha256.every((h) => /^[0-9a-f]{64}$/.test(h)));
    assert.deepEqual(await catchUp(c, tenant, first.cursor), { ids: [], sha256: [], cursor: first.cursor });
    const next = await c.events.ingest(tenant, { type, data: { later: true } });
    const second = await catchUp(c, tenant, first.cursor);
    assert.deepEqual(second.ids, [next.id]);
  });
});
