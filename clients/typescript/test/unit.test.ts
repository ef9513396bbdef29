// The parts of the client that need no server: the map of the document's
// operations to the client's calls, Retry-After, query strings, the raw
// envelope scan, Problem and the base URL.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";

import { Client, Problem, WebhookdError, parseRetryAfter, type operations } from "../src/index.js";
import { elements, members, whole } from "../src/rawjson.js";
import { queryString } from "../src/transport.js";

/** The operations of the document the client does not call, and why. */
const notCalled = {
  metrics: "Prometheus scrapes it, in its own text format",
  openapi: "the document is for generators and validators, not for calls",
  webhook: "webhookd sends it; the receiver's side is a verifier",
  endpointVerification: "webhookd sends it; the receiver answers it",
  opEndpointCreated: "webhookd sends it to the operational endpoints",
  opEndpointUpdated: "webhookd sends it to the operational endpoints",
  opEndpointDeleted: "webhookd sends it to the operational endpoints",
  opEndpointDisabled: "webhookd sends it to the operational endpoints",
  opEndpointEnabled: "webhookd sends it to the operational endpoints",
  opEndpointFailing: "webhookd sends it to the operational endpoints",
  opEndpointRecovered: "webhookd sends it to the operational endpoints",
  opDeliveryDead: "webhookd sends it to the operational endpoints",
  opTenantDeleted: "webhookd sends it to the operational endpoints",
  opTaskFinished: "webhookd sends it to the operational endpoints",
} as const;

/**
 * The call of the client for each operation of the document. Its type
 * names every operation of src/openapi.ts but notCalled: an operation
 * added to the document (and regenerated) fails to compile here until it
 * has a call, and one removed fails as an unknown key.
 */
const calls: Record<Exclude<keyof operations, keyof typeof notCalled>, (c: Client) => unknown> = {
  health: (c) => c.health,
  ready: (c) => c.ready,
  listTenants: (c) => c.tenants.list,
  putTenant: (c) => c.tenants.put,
  getTenant: (c) => c.tenants.get,
  deleteTenant: (c) => c.tenants.delete,
  listEventTypes: (c) => c.eventTypes.list,
  putEventType: (c) => c.eventTypes.put,
  deleteEventType: (c) => c.eventTypes.delete,
  listRetryPolicies: (c) => c.retryPolicies.list,
  createEndpoint: (c) => c.endpoints.create,
  listEndpoints: (c) => c.endpoints.list,
  getEndpoint: (c) => c.endpoints.get,
  updateEndpoint: (c) => c.endpoints.update,
  deleteEndpoint: (c) => c.endpoints.delete,
  rotateSecret: (c) => c.endpoints.rotateSecret,
  revokeSecret: (c) => c.endpoints.revokeSecret,
  revealSecret: (c) => c.endpoints.revealSecret,
  verifyEndpoint: (c) => c.endpoints.verify,
  sendTestEvent: (c) => c.endpoints.sendTestEvent,
  backfillEndpoint: (c) => c.endpoints.backfill,
  ingest: (c) => c.events.ingest,
  listEvents: (c) => c.events.feed,
  getEvent: (c) => c.events.get,
  listDeliveries: (c) => c.deliveries.list,
  getDelivery: (c) => c.deliveries.get,
  replayDelivery: (c) => c.deliveries.replay,
  skipDelivery: (c) => c.deliveries.skip,
  listDeadLetters: (c) => c.deadLetters.list,
  replayDeadLetters: (c) => c.deadLetters.replay,
  report: (c) => c.reports.get,
  reportAll: (c) => c.reports.all,
  issueAccessToken: (c) => c.accessTokens.issue,
  listAccessTokens: (c) => c.accessTokens.list,
  revokeAccessToken: (c) => c.accessTokens.revoke,
  createPortalLink: (c) => c.portalLinks.create,
  createOperationalEndpoint: (c) => c.operationalEndpoints.create,
  listOperationalEndpoints: (c) => c.operationalEndpoints.list,
  getOperationalEndpoint: (c) => c.operationalEndpoints.get,
  updateOperationalEndpoint: (c) => c.operationalEndpoints.update,
  deleteOperationalEndpoint: (c) => c.operationalEndpoints.delete,
  rotateOperationalSecret: (c) => c.operationalEndpoints.rotateSecret,
  listTasks: (c) => c.tasks.list,
  getTask: (c) => c.tasks.get,
  listTenantTasks: (c) => c.tasks.listOfTenant,
  getTenantTask: (c) => c.tasks.getOfTenant,
  backup: (c) => c.admin.backup,
};

test("the client has a call for every operation of httpapi/openapi.json", () => {
  // Read from the document itself, not the generated file: this also
  // fails when src/openapi.ts was not regenerated after a new operation.
  const doc = JSON.parse(readFileSync(resolve("../../httpapi/openapi.json"), "utf8")) as {
    paths: Record<string, Record<string, unknown>>;
    webhooks: Record<string, Record<string, unknown>>;
  };
  const ids: string[] = [];
  for (const items of [doc.paths, doc.webhooks]) {
    for (const item of Object.values(items)) {
      for (const op of Object.values(item)) {
        const id = (op as { operationId?: unknown }).operationId;
        if (typeof id === "string") ids.push(id);
      }
    }
  }
  const c = new Client("http://127.0.0.1:1");
  const named = new Set<string>([...Object.keys(calls), ...Object.keys(notCalled)]);
  for (const id of ids) {
    assert.ok(named.has(id), `operation ${id} has no call in the client: add one, and name it in calls`);
  }
  assert.equal(ids.length, named.size, "an operation named here is gone from the document");
  for (const [id, call] of Object.entries(calls)) {
    assert.equal(typeof call(c), "function", `the call of ${id} is not a function`);
  }
});

test("parseRetryAfter reads seconds and HTTP dates", () => {
  const now = Date.parse("2026-03-01T12:00:00Z");
  const cases: [string | null, number | undefined][] = [
    [null, undefined],
    ["", undefined],
    ["0", 0],
    ["1", 1000],
    [" 120 ", 120_000],
    ["-1", undefined],
    ["1.5", undefined],
    ["soon", undefined],
    ["Sun, 01 Mar 2026 12:00:30 GMT", 30_000],
    ["Sun, 01 Mar 2026 11:00:00 GMT", 0], // in the past: at once
    ["99999999999", 2 ** 31 * 1000], // bounded
  ];
  for (const [v, want] of cases) {
    assert.equal(parseRetryAfter(v, now), want, `parseRetryAfter(${JSON.stringify(v)})`);
  }
});

test("queryString leaves out what is not set and repeats arrays", () => {
  assert.equal(queryString(undefined), "");
  assert.equal(queryString({ a: undefined, b: null, c: "" }), "");
  assert.equal(queryString({ limit: 2, force: true, cursor: "x y" }), "?limit=2&force=true&cursor=x+y");
  assert.equal(queryString({ since: new Date("2026-01-02T03:04:05.006Z") }), "?since=2026-01-02T03%3A04%3A05.006Z");
  assert.equal(queryString({ a: ["1", "2"] }), "?a=1&a=2");
});

test("the raw scan finds each member's exact text", () => {
  const text = ` {"data":[{"cursor":"c1","event":{"b":1, "a":"x\\"}{"} ,"test":true},{"event":{"id":"2","data":[1,{"k":null}]}}],"next_cursor":"c2","has_more":false}`;
  const data = members(text, whole(text)).get("data");
  assert.ok(data);
  const items = elements(text, data);
  assert.equal(items.length, 2);
  const got = items.map((span) => {
    const ev = members(text, span).get("event");
    assert.ok(ev);
    return text.slice(ev[0], ev[1]);
  });
  assert.deepEqual(got, [`{"b":1, "a":"x\\"}{"}`, `{"id":"2","data":[1,{"k":null}]}`]);
  const next = members(text, whole(text)).get("next_cursor");
  assert.ok(next);
  assert.equal(text.slice(next[0], next[1]), `"c2"`);
  assert.deepEqual(elements("[]", whole("[]")), []);
  assert.equal(members("{}", whole("{}")).size, 0);
});

test("a Problem says its status, code, detail and field", () => {
  const p = new Problem({ status: 422, code: "unknown_event_type", title: "Unknown event type", detail: "event type x is not in the catalogue", field: "type" });
  assert.ok(p instanceof Error);
  assert.equal(p.name, "Problem");
  assert.equal(p.message, "webhookd: 422 unknown_event_type: event type x is not in the catalogue (field type)");
  assert.ok(Problem.is(p));
  assert.ok(Problem.is(p, "invalid_field", "unknown_event_type"));
  assert.ok(!Problem.is(p, "invalid_field"));
  assert.ok(!Problem.is(new Error("x")));
  const plain = new Problem({ status: 502, code: "", title: "Bad Gateway", detail: "" });
  assert.equal(plain.message, "webhookd: 502: Bad Gateway");
  assert.equal(plain.field, undefined);
});

test("a base URL must be absolute http or https, without query or fragment", () => {
  for (const bad of ["", "127.0.0.1:8080", "ftp://h", "http://h/?a=1", "http://h/#x"]) {
    assert.throws(() => new Client(bad), WebhookdError, bad);
  }
  assert.equal(new Client("http://127.0.0.1:8080/").baseUrl, "http://127.0.0.1:8080");
  assert.equal(new Client("https://h.example/api/").baseUrl, "https://h.example/api");
});

test("a server that cannot be reached is a WebhookdError naming the call", async () => {
  const c = new Client("http://127.0.0.1:1", { maxAttempts: 1 });
  await assert.rejects(c.tenants.get("acme"), (err: unknown) => {
    assert.ok(err instanceof WebhookdError, String(err));
    assert.match(err.message, /^webhookd: GET \/v1\/tenants\/acme: /);
    return true;
  });
});

test("path segments are escaped", async () => {
  let got = "";
  const c = new Client("http://h.example/base", {
    fetch: async (input) => {
      got = String(input);
      return new Response("{}", { status: 200, headers: { "content-type": "application/json" } });
    },
  });
  await c.endpoints.get("a/b", "ep 1?");
  assert.equal(got, "http://h.example/base/v1/tenants/a%2Fb/endpoints/ep%201%3F");
});
