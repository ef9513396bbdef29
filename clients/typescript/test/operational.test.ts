// The operational endpoints against the real server: made, listed, read,
// changed, rotated and deleted, and the operational event of an action
// received, signed with the endpoint's secret.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Problem } from "../src/index.js";
import { adminClient, needsServer, poll, startReceiver, unique } from "./helpers.js";

test("operational endpoints against the real server", needsServer, async (t) => {
  const c = adminClient();
  const ops = await startReceiver();
  t.after(() => ops.close());
  const made = await c.operationalEndpoints.create({ url: `${ops.url}/ops`, event_types: ["endpoint.created"] });
  ops.secrets = [made.secret];
  try {
    assert.equal(made.source, "api");
    const ids: string[] = [];
    for await (const ep of c.operationalEndpoints.list()) ids.push(ep.id);
    assert.ok(ids.includes(made.id), "the operational endpoint is listed");

    // An endpoint created tells it.
    const tenant = unique("ts-ops-");
    await c.tenants.put(tenant, { name: "Ops" });
    const ep = await c.endpoints.create(tenant, { url: "https://hooks.example.com/", event_types: ["*"] });
    const got = await poll("endpoint.created", async () =>
      ops.got.find((r) => (JSON.parse(r.body.toString()) as { data: { endpoint_id?: string } }).data.endpoint_id === ep.id),
    );
    assert.deepEqual(got.verifiedWith, [made.secret], "signed with the operational endpoint's secret");
    const event = JSON.parse(got.body.toString()) as { type: string; data: { tenant: string; at: string } };
    assert.equal(event.type, "endpoint.created");
    assert.equal(event.data.tenant, tenant);

    const changed = await c.operationalEndpoints.update(made.id, { description: "pager" });
    assert.equal(changed.description, "pager");
    assert.equal((await c.operationalEndpoints.get(made.id)).description, "pager");
    const rotated = await c.operationalEndpoints.rotateSecret(made.id, { grace: "0s" });
    assert.notEqual(rotated.secret, made.secret);
    assert.equal(rotated.previous_secret_expires, undefined);
  } finally {
    await c.operationalEndpoints.delete(made.id);
  }
  await assert.rejects(c.operationalEndpoints.get(made.id), (err: unknown) => err instanceof Problem && err.code === "endpoint_not_found");
});
