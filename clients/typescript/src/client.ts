import { randomBytes } from "node:crypto";

import { Feed, Listing } from "./paging.js";
import { WebhookdError } from "./problem.js";
import { elements, members, whole } from "./rawjson.js";
import { type ClientOptions, Transport, path } from "./transport.js";
import type {
  AccessToken,
  AccessTokenInput,
  Answer,
  BackfillInput,
  CallOptions,
  CreatedEndpoint,
  CreatedOperationalEndpoint,
  Delivery,
  DeliveryFilter,
  Endpoint,
  EndpointInput,
  EndpointPatch,
  EventDetail,
  EventType,
  EventTypeInput,
  FeedEvent,
  FeedFilter,
  IngestInput,
  IngestOptions,
  IngestResult,
  IssuedToken,
  Loose,
  OperationalEndpoint,
  OperationalEndpointInput,
  OperationalEndpointPatch,
  OperationalSecretAnswer,
  Page,
  Paging,
  PortalLink,
  PortalLinkInput,
  Query,
  ReplayRangeInput,
  Report,
  RetryPolicy,
  RevealAnswer,
  RotateInput,
  SecretAnswer,
  Task,
  Tenant,
  TenantInput,
  TenantsReport,
  TestEventAnswer,
  TestEventInput,
  Verification,
  WaitOptions,
} from "./types.js";

const tenants = (tenant: string, ...more: string[]) => path("v1", "tenants", tenant, ...more);
const operational = (...more: string[]) => path("v1", "operational-endpoints", ...more);

/**
 * A client of one webhookd server. Its calls are grouped by what they act
 * on (client.tenants, client.endpoints, client.events, ...), each named
 * after what it does; each takes, last, CallOptions with an AbortSignal.
 *
 *     const client = new Client("http://127.0.0.1:8080", { token: process.env.WEBHOOKD_TOKEN });
 *     await client.events.ingest("acme", { type: "invoice.paid", data: { id: "in_1" } });
 *     for await (const d of client.deliveries.list("acme", { state: "dead" })) console.log(d.id, d.reason);
 *
 * Every error answer rejects with a Problem (status, code, field, detail);
 * see the README for retries and paging.
 */
export class Client {
  readonly #t: Transport;
  readonly tenants: Tenants;
  readonly eventTypes: EventTypes;
  readonly retryPolicies: RetryPolicies;
  readonly endpoints: Endpoints;
  readonly events: Events;
  readonly deliveries: Deliveries;
  readonly deadLetters: DeadLetters;
  readonly reports: Reports;
  readonly accessTokens: AccessTokens;
  readonly portalLinks: PortalLinks;
  readonly operationalEndpoints: OperationalEndpoints;
  readonly tasks: Tasks;
  readonly admin: Admin;

  /**
   * Makes a client of the server at baseUrl ("http://127.0.0.1:8080", or
   * with a path prefix when the API is served below one). It throws a
   * WebhookdError only for a baseUrl that is not an absolute http or https
   * URL without query or fragment.
   */
  constructor(baseUrl: string, options: ClientOptions = {}) {
    const t = new Transport(baseUrl, options);
    this.#t = t;
    this.tenants = new Tenants(t);
    this.eventTypes = new EventTypes(t);
    this.retryPolicies = new RetryPolicies(t);
    this.endpoints = new Endpoints(t);
    this.events = new Events(t);
    this.deliveries = new Deliveries(t);
    this.deadLetters = new DeadLetters(t);
    this.reports = new Reports(t);
    this.accessTokens = new AccessTokens(t);
    this.portalLinks = new PortalLinks(t);
    this.operationalEndpoints = new OperationalEndpoints(t);
    this.tasks = new Tasks(t);
    this.admin = new Admin(t);
  }

  /** The base URL the client calls, without a trailing slash. */
  get baseUrl(): string {
    return this.#t.base;
  }

  /** Resolves when the server answers /healthz: the process is up. */
  async health(call?: CallOptions): Promise<Answer<"health", 200>> {
    return this.#t.json({ method: "GET", path: "/healthz", retry: true }, call);
  }

  /**
   * Resolves when the server can take work (/readyz), else rejects with a
   * Problem (503 unavailable) whose detail says why. Asked once, never
   * retried: a readiness check wants the answer of now.
   */
  async ready(call?: CallOptions): Promise<Answer<"ready", 200>> {
    return this.#t.json({ method: "GET", path: "/readyz" }, call);
  }
}

/** One page of the listing at p, with query q and cursor. */
function pageOf<T>(t: Transport, p: string, q: object, cursor: string | undefined, call?: CallOptions): Promise<Page<T>> {
  return t.json<Page<T>>({ method: "GET", path: p, query: { ...q, cursor }, retry: true }, call);
}

/** A Listing of the listing at p, filtered by o (whose cursor is where it starts). */
function listingOf<T>(t: Transport, p: string, o: { cursor?: string | null | undefined } | undefined, call?: CallOptions): Listing<T> {
  const { cursor, ...q } = o ?? {};
  return new Listing<T>(p, cursor, (c) => pageOf<T>(t, p, q, c, call));
}

/** One page of the listing at p, as o asks (o.cursor: after it; null, undefined or "": the first). */
function onePage<T>(t: Transport, p: string, o: { cursor?: string | null | undefined } | undefined, call?: CallOptions): Promise<Page<T>> {
  const { cursor, ...q } = o ?? {};
  return pageOf<T>(t, p, q, cursor || undefined, call);
}

/** Tenants: the customers of the sender, each the owner of endpoints. */
export class Tenants {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Walks every tenant, in id order. Admin tokens only. */
  list(o?: Paging<"listTenants">, call?: CallOptions): Listing<Tenant> {
    return listingOf(this.#t, "/v1/tenants", o, call);
  }

  /** One page of the tenants, for a walk of one's own (list walks them all). */
  page(o?: Paging<"listTenants">, call?: CallOptions): Promise<Answer<"listTenants", 200>> {
    return onePage(this.#t, "/v1/tenants", o, call);
  }

  /** Creates tenant id or updates it, and says which. Admin tokens only (a test token may create test tenants). */
  async put(id: string, input: TenantInput = {}, call?: CallOptions): Promise<{ tenant: Tenant; created: boolean }> {
    const r = { method: "PUT", path: tenants(id), body: input } as const;
    const { res, text } = await this.#t.text(r, call);
    return { tenant: this.#t.parse<Tenant>(r, text), created: res.status === 201 };
  }

  /** Returns tenant id. */
  get(id: string, call?: CallOptions): Promise<Tenant> {
    return this.#t.json({ method: "GET", path: tenants(id), retry: true }, call);
  }

  /**
   * Deletes tenant id and everything of it: the tenant, its endpoints and
   * tokens at once, the rest by the task it returns (kind tenant.purge,
   * the operator's: client.tasks.wait follows it). A tenant with
   * deliveries pending is refused (pending_deliveries) unless force is
   * set, which drops them.
   */
  async delete(id: string, o: Loose<Query<"deleteTenant">> = {}, call?: CallOptions): Promise<Task> {
    const a = await this.#t.json<Answer<"deleteTenant", 202>>({ method: "DELETE", path: tenants(id), query: o }, call);
    return a.task;
  }
}

/** The catalogue of event types that may be ingested, named resource.action. */
export class EventTypes {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Walks the catalogue, in name order. Every token may read it. */
  list(o?: Paging<"listEventTypes">, call?: CallOptions): Listing<EventType> {
    return listingOf(this.#t, "/v1/event-types", o, call);
  }

  /** One page of the catalogue. */
  page(o?: Paging<"listEventTypes">, call?: CallOptions): Promise<Answer<"listEventTypes", 200>> {
    return onePage(this.#t, "/v1/event-types", o, call);
  }

  /**
   * Adds name to the catalogue, or replaces its description, status,
   * schema and example (a put without one of them resets it: no example,
   * no schema, active), and says which. A schema that does not compile is
   * a Problem invalid_field naming "schema".
   */
  async put(name: string, input: EventTypeInput = {}, call?: CallOptions): Promise<{ eventType: EventType; created: boolean }> {
    const r = { method: "PUT", path: path("v1", "event-types", name), body: input } as const;
    const { res, text } = await this.#t.text(r, call);
    return { eventType: this.#t.parse<EventType>(r, text), created: res.status === 201 };
  }

  /** Takes name out of the catalogue: ingest of that type is refused from then on; events stored already are delivered as usual. */
  async delete(name: string, call?: CallOptions): Promise<void> {
    await this.#t.json({ method: "DELETE", path: path("v1", "event-types", name) }, call);
  }
}

/** The server's retry policies: what a tenant's or an endpoint's retry_policy may name. */
export class RetryPolicies {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Walks the server's retry policies, in name order. Every token may read them. */
  list(o?: Paging<"listRetryPolicies">, call?: CallOptions): Listing<RetryPolicy> {
    return listingOf(this.#t, "/v1/retry-policies", o, call);
  }

  /** One page of the retry policies. */
  page(o?: Paging<"listRetryPolicies">, call?: CallOptions): Promise<Answer<"listRetryPolicies", 200>> {
    return onePage(this.#t, "/v1/retry-policies", o, call);
  }
}

/** A tenant's endpoints: URLs that receive the event types they subscribe to, signed with their own secrets. */
export class Endpoints {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Adds an endpoint to tenant and returns it with its signing secret. No read shows it again; revealSecret does, recorded. */
  create(tenant: string, input: EndpointInput, call?: CallOptions): Promise<CreatedEndpoint> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "endpoints"), body: input }, call);
  }

  /** Walks tenant's endpoints, in id order. */
  list(tenant: string, o?: Paging<"listEndpoints">, call?: CallOptions): Listing<Endpoint> {
    return listingOf(this.#t, tenants(tenant, "endpoints"), o, call);
  }

  /** One page of tenant's endpoints. */
  page(tenant: string, o?: Paging<"listEndpoints">, call?: CallOptions): Promise<Answer<"listEndpoints", 200>> {
    return onePage(this.#t, tenants(tenant, "endpoints"), o, call);
  }

  /** Returns endpoint id of tenant. */
  get(tenant: string, id: string, call?: CallOptions): Promise<Endpoint> {
    return this.#t.json({ method: "GET", path: tenants(tenant, "endpoints", id), retry: true }, call);
  }

  /** Changes the members of endpoint id that patch has; the others are left as they are. */
  update(tenant: string, id: string, patch: EndpointPatch, call?: CallOptions): Promise<Endpoint> {
    return this.#t.json({ method: "PATCH", path: tenants(tenant, "endpoints", id), body: patch }, call);
  }

  /** Deletes endpoint id of tenant; its pending deliveries are not attempted again. */
  async delete(tenant: string, id: string, call?: CallOptions): Promise<void> {
    await this.#t.json({ method: "DELETE", path: tenants(tenant, "endpoints", id) }, call);
  }

  /**
   * Gives endpoint id a new secret. The previous one keeps signing beside
   * it for input's grace ("24h" or grace_seconds; absent: the server's
   * default, 24 hours; "0s": dropped at once, for a leaked key), so the
   * receiver can switch keys without dropping a webhook.
   */
  rotateSecret(tenant: string, id: string, input: RotateInput = {}, call?: CallOptions): Promise<SecretAnswer> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "endpoints", id, "secret", "rotate"), body: input }, call);
  }

  /** Replaces every secret of endpoint id with a new one at once: the old ones sign nothing more. */
  revokeSecret(tenant: string, id: string, call?: CallOptions): Promise<SecretAnswer> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "endpoints", id, "secret", "revoke") }, call);
  }

  /**
   * Shows the secrets endpoint id signs with now, again (the current one
   * and the old ones in their grace window), and its custom headers in
   * plain. The server records who asked and when (secret_reveals). Keep the
   * answer out of logs.
   */
  revealSecret(tenant: string, id: string, call?: CallOptions): Promise<RevealAnswer> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "endpoints", id, "secret", "reveal") }, call);
  }

  /** Sends the Standard Webhooks verification challenge to endpoint id now. A challenge that fails is no error: the answer says verified false and why. */
  verify(tenant: string, id: string, call?: CallOptions): Promise<Verification> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "endpoints", id, "verify") }, call);
  }

  /**
   * Sends endpoint id a test event of input.type (a catalogue type it
   * subscribes to; absent: the first by name with an example, else the
   * first) whose data is the type's example: stored, signed and delivered
   * as any event, to that endpoint only, and marked test.
   */
  sendTestEvent(tenant: string, id: string, input: TestEventInput = {}, call?: CallOptions): Promise<TestEventAnswer> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "endpoints", id, "test-events"), body: input }, call);
  }

  /**
   * Starts delivering to endpoint id every retained event created in
   * [since, until) that it receives and that has no delivery to it yet,
   * each in a new cycle, and returns the task, running
   * (client.tasks.wait follows it): its done counts the deliveries made,
   * its skipped the events that had one, so a second backfill makes none
   * twice. At the tenant's pending bound the task waits and goes on by
   * itself. A tenant at its bound of running tasks is refused
   * (limit_reached).
   */
  async backfill(tenant: string, id: string, input: BackfillInput, call?: CallOptions): Promise<Task> {
    const a = await this.#t.json<Answer<"backfillEndpoint", 202>>(
      { method: "POST", path: tenants(tenant, "endpoints", id, "backfill"), body: input },
      call,
    );
    return a.task;
  }
}

/** A tenant's events: ingest, read one, and the reconciliation feed. */
export class Events {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /**
   * Stores an event for tenant and schedules its delivery to every endpoint
   * subscribed to its type. It is sent with o.idempotencyKey, or a random
   * key, and the same key on every retry, so a retried ingest stores one
   * event; the result says which key and whether the server had it
   * already (replayed).
   */
  async ingest(tenant: string, input: IngestInput, o: IngestOptions = {}): Promise<IngestResult> {
    const idempotencyKey = o.idempotencyKey || newIdempotencyKey();
    const r = {
      method: "POST",
      path: tenants(tenant, "events"),
      body: input,
      headers: { "idempotency-key": idempotencyKey },
      retry: true, // the key makes a repeat harmless
    } as const;
    const { res, text } = await this.#t.text(r, o);
    const answer = this.#t.parse<Answer<"ingest", 202>>(r, text);
    return { ...answer, idempotencyKey, replayed: res.headers.get("idempotent-replayed") === "true" };
  }

  /** Returns event id of tenant: its envelope exactly as delivered (rawEvent), and its deliveries. */
  async get(tenant: string, id: string, call?: CallOptions): Promise<EventDetail> {
    const r = { method: "GET", path: tenants(tenant, "events", id), retry: true } as const;
    const { text } = await this.#t.text(r, call);
    const answer = this.#t.parse<Answer<"getEvent", 200>>(r, text);
    return { ...answer, rawEvent: rawMember(r.path, text, members(text, whole(text)).get("event")) };
  }

  /**
   * A walk of tenant's reconciliation feed from f.cursor (absent: the
   * first event): `for await (const e of feed)`, then feed.cursor is where
   * to resume. Nothing is sent until it is walked.
   */
  feed(tenant: string, f: FeedFilter = {}, call?: CallOptions): Feed {
    const p = tenants(tenant, "events");
    const { cursor, ...q } = f;
    return new Feed(p, cursor, async (c) => {
      const r = { method: "GET", path: p, query: { ...q, cursor: c }, retry: true } as const;
      const { text } = await this.#t.text(r, call);
      const answer = this.#t.parse<Answer<"listEvents", 200>>(r, text);
      const raws = elements(text, members(text, whole(text)).get("data") ?? [0, 0]);
      const data: FeedEvent[] = answer.data.map((entry, i) => {
        const span = raws[i];
        const event = span === undefined ? undefined : members(text, span).get("event");
        return { ...entry, rawEvent: rawMember(p, text, event) };
      });
      return { ...answer, data };
    });
  }
}

/** The text of span in text; a WebhookdError when there is none. */
function rawMember(what: string, text: string, span: readonly [number, number] | undefined): string {
  if (span === undefined || span[1] <= span[0]) {
    throw new WebhookdError(`webhookd: GET ${what}: the answer has no event envelope`);
  }
  return text.slice(span[0], span[1]);
}

/** A random idempotency key: 128 bits, hex. */
function newIdempotencyKey(): string {
  return `wc_${randomBytes(16).toString("hex")}`;
}

/** A tenant's delivery log: each sending of an event to an endpoint, with its attempts and replays. */
export class Deliveries {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Walks tenant's delivery log, newest first, keeping the deliveries f selects. */
  list(tenant: string, f?: DeliveryFilter, call?: CallOptions): Listing<Delivery> {
    return listingOf(this.#t, tenants(tenant, "deliveries"), f, call);
  }

  /** One page of tenant's delivery log, for a walk of one's own: `cursor = page.next_cursor` until it is null. */
  page(tenant: string, f?: DeliveryFilter, call?: CallOptions): Promise<Answer<"listDeliveries", 200>> {
    return onePage(this.#t, tenants(tenant, "deliveries"), f, call);
  }

  /** Returns delivery id of tenant with its attempts and replays. */
  get(tenant: string, id: string, call?: CallOptions): Promise<Delivery> {
    return this.#t.json({ method: "GET", path: tenants(tenant, "deliveries", id), retry: true }, call);
  }

  /** Sends delivery id again, in a new cycle, whatever its state, and returns it as queued. A delivery whose endpoint was deleted has nowhere to go: a Problem endpoint_not_found (field endpoint_id), and nothing changes. */
  replay(tenant: string, id: string, call?: CallOptions): Promise<Delivery> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "deliveries", id, "replay") }, call);
  }

  /**
   * Lets the line of delivery id go on without it: it must be a dead
   * delivery blocking its line (its endpoint's on_dead is block), else
   * the Problem's code is not_blocking.
   */
  skip(tenant: string, id: string, call?: CallOptions): Promise<Delivery> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "deliveries", id, "skip") }, call);
  }
}

/** A tenant's dead letters: the deliveries in state dead. */
export class DeadLetters {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Walks tenant's dead letters. */
  list(tenant: string, o?: Paging<"listDeadLetters">, call?: CallOptions): Listing<Delivery> {
    return listingOf(this.#t, tenants(tenant, "dead-letters"), o, call);
  }

  /** One page of tenant's dead letters. */
  page(tenant: string, o?: Paging<"listDeadLetters">, call?: CallOptions): Promise<Answer<"listDeadLetters", 200>> {
    return onePage(this.#t, tenants(tenant, "dead-letters"), o, call);
  }

  /**
   * Starts sending again every dead letter of tenant that died in [since,
   * until) (of one endpoint, or all), and returns the task, running
   * (client.tasks.wait follows it: its done counts the dead letters
   * replayed). A tenant at its bound of running tasks is refused
   * (limit_reached).
   */
  async replay(tenant: string, range: ReplayRangeInput, call?: CallOptions): Promise<Task> {
    const a = await this.#t.json<Answer<"replayDeadLetters", 202>>(
      { method: "POST", path: tenants(tenant, "dead-letters", "replay"), body: range },
      call,
    );
    return a.task;
  }
}

/**
 * Background tasks: a range replay, a backfill, the purge of a deleted
 * tenant, run by the server from the call that started them until they
 * end, across its restarts.
 */
export class Tasks {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Walks every task, newest first, the operator's (a tenant's purge) included. Admin tokens only. */
  list(o?: Paging<"listTasks">, call?: CallOptions): Listing<Task> {
    return listingOf(this.#t, path("v1", "tasks"), o, call);
  }

  /** One page of every task. */
  page(o?: Paging<"listTasks">, call?: CallOptions): Promise<Answer<"listTasks", 200>> {
    return onePage(this.#t, path("v1", "tasks"), o, call);
  }

  /** Returns any task, the operator's included. Admin tokens only. */
  get(id: string, call?: CallOptions): Promise<Task> {
    return this.#t.json({ method: "GET", path: path("v1", "tasks", id), retry: true }, call);
  }

  /** Walks tenant's tasks (its range replays and backfills), newest first. */
  listOfTenant(tenant: string, o?: Paging<"listTenantTasks">, call?: CallOptions): Listing<Task> {
    return listingOf(this.#t, tenants(tenant, "tasks"), o, call);
  }

  /** One page of tenant's tasks. */
  pageOfTenant(tenant: string, o?: Paging<"listTenantTasks">, call?: CallOptions): Promise<Answer<"listTenantTasks", 200>> {
    return onePage(this.#t, tenants(tenant, "tasks"), o, call);
  }

  /** Returns task id of tenant (task_not_found for one not the tenant's). */
  getOfTenant(tenant: string, id: string, call?: CallOptions): Promise<Task> {
    return this.#t.json({ method: "GET", path: tenants(tenant, "tasks", id), retry: true }, call);
  }

  /**
   * Reads task every o.pollMs (500) until it has ended, and returns it as
   * it ended: succeeded or failed (state; error says why). A tenant's task
   * is read through its tenant's route, so its tenant's token may wait
   * for it; the operator's through the admin's. It rejects when a read
   * does, or with the signal's reason when it aborts.
   */
  async wait(task: Task, o: WaitOptions = {}): Promise<Task> {
    const call: CallOptions = { signal: o.signal };
    const pollMs = o.pollMs ?? 500;
    let t = task;
    while (t.state === "running") {
      await sleep(pollMs, o.signal);
      t = t.tenant !== undefined ? await this.getOfTenant(t.tenant, t.id, call) : await this.get(t.id, call);
    }
    return t;
  }
}

/** Resolves after ms, or rejects with signal's reason when it aborts first. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Delivery reports: how a tenant's last events were delivered, with consistency checks. */
export class Reports {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Returns the delivery report over tenant's last o.last events (absent: the server's default, 1000). */
  get(tenant: string, o: Loose<Query<"report">> = {}, call?: CallOptions): Promise<Report> {
    return this.#t.json({ method: "GET", path: tenants(tenant, "report"), query: o, retry: true }, call);
  }

  /** Returns the report of every tenant over its last o.last events, and their total. Admin tokens only. */
  all(o: Loose<Query<"reportAll">> = {}, call?: CallOptions): Promise<TenantsReport> {
    return this.#t.json({ method: "GET", path: "/v1/admin/report", query: o, retry: true }, call);
  }
}

/** Tenant access tokens: bearer tokens that act on one tenant's routes only. */
export class AccessTokens {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Makes a token that acts on tenant's routes only, for input's ttl (absent: the server's default, 24h; at most 30 days). The token is shown this once. Admin tokens only. */
  issue(tenant: string, input: AccessTokenInput = {}, call?: CallOptions): Promise<IssuedToken> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "access-tokens"), body: input }, call);
  }

  /** Walks tenant's access tokens, never their values (revoked and expired ones included until the server prunes them). Admin tokens only. */
  list(tenant: string, o?: Paging<"listAccessTokens">, call?: CallOptions): Listing<AccessToken> {
    return listingOf(this.#t, tenants(tenant, "access-tokens"), o, call);
  }

  /** One page of tenant's access tokens. */
  page(tenant: string, o?: Paging<"listAccessTokens">, call?: CallOptions): Promise<Answer<"listAccessTokens", 200>> {
    return onePage(this.#t, tenants(tenant, "access-tokens"), o, call);
  }

  /** Revokes token id ("tok_…") of tenant: it is refused from the next request on. Admin tokens only. */
  async revoke(tenant: string, id: string, call?: CallOptions): Promise<void> {
    await this.#t.json({ method: "DELETE", path: tenants(tenant, "access-tokens", id) }, call);
  }
}

/** Portal links: one-time URLs that open the console as a tenant, for the customer's browser. */
/**
 * The operator's operational endpoints: they receive webhookd's own
 * events about the customers' endpoints, deliveries and tenants, signed
 * and retried like any webhook. Admin tokens of the live environment only.
 */
export class OperationalEndpoints {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /** Makes an operational endpoint and returns it with its signing secret, which no read shows again. */
  create(input: OperationalEndpointInput, call?: CallOptions): Promise<CreatedOperationalEndpoint> {
    return this.#t.json({ method: "POST", path: operational(), body: input }, call);
  }

  /** Walks the operational endpoints, in creation order, the [alerts] one (source "config") among them. */
  list(o?: Paging<"listOperationalEndpoints">, call?: CallOptions): Listing<OperationalEndpoint> {
    return listingOf(this.#t, operational(), o, call);
  }

  /** One page of the operational endpoints. */
  page(o?: Paging<"listOperationalEndpoints">, call?: CallOptions): Promise<Answer<"listOperationalEndpoints", 200>> {
    return onePage(this.#t, operational(), o, call);
  }

  /** Returns operational endpoint id. */
  get(id: string, call?: CallOptions): Promise<OperationalEndpoint> {
    return this.#t.json({ method: "GET", path: operational(id), retry: true }, call);
  }

  /** Changes the members of operational endpoint id that patch has. The [alerts] endpoint's url is the config file's (409 config_managed). */
  update(id: string, patch: OperationalEndpointPatch, call?: CallOptions): Promise<OperationalEndpoint> {
    return this.#t.json({ method: "PATCH", path: operational(id), body: patch }, call);
  }

  /** Deletes operational endpoint id (not the [alerts] one: 409 config_managed). */
  async delete(id: string, call?: CallOptions): Promise<void> {
    await this.#t.json({ method: "DELETE", path: operational(id) }, call);
  }

  /** Gives operational endpoint id a new secret, as endpoints.rotateSecret does an endpoint's. */
  rotateSecret(id: string, input: RotateInput = {}, call?: CallOptions): Promise<OperationalSecretAnswer> {
    return this.#t.json({ method: "POST", path: operational(id, "secret", "rotate"), body: input }, call);
  }
}

export class PortalLinks {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /**
   * Makes a one-time URL that opens the console as tenant in the browser
   * that opens it, within input's ttl (absent: 10 minutes, at most 1h);
   * return_url is where the console's "back" link goes. Hand it to the
   * customer's browser right away. Admin tokens only.
   */
  create(tenant: string, input: PortalLinkInput = {}, call?: CallOptions): Promise<PortalLink> {
    return this.#t.json({ method: "POST", path: tenants(tenant, "portal-links"), body: input }, call);
  }
}

/** What only an admin token may do to the whole server. */
export class Admin {
  readonly #t: Transport;
  /** @internal */
  constructor(t: Transport) {
    this.#t = t;
  }

  /**
   * Streams a consistent copy of the server's database: iterate the
   * chunks into a file (`await pipeline(Readable.from(backup), out)`). The
   * copy is whole only when the iteration ends without an error; a
   * transfer cut short rejects it, and what was written must then be thrown
   * away. Walk it once. A server without a backup source answers
   * not_found.
   */
  async backup(call?: CallOptions): Promise<AsyncIterable<Uint8Array>> {
    const r = { method: "GET", path: "/v1/admin/backup", retry: true } as const;
    const { res, done } = await this.#t.send(r, call);
    const length = res.headers.get("content-length");
    const want = length === null ? undefined : Number(length);
    const body = res.body;
    return {
      async *[Symbol.asyncIterator]() {
        let n = 0;
        try {
          if (body !== null) {
            const reader = body.getReader();
            let read = false;
            try {
              for (;;) {
                const { done: end, value } = await reader.read();
                if (end) break;
                n += value.byteLength;
                yield value;
              }
              read = true;
            } catch (err) {
              throw new WebhookdError(`webhookd: GET ${r.path}: after ${n} bytes: ${err instanceof Error ? err.message : String(err)}`, {
                cause: err,
              });
            } finally {
              if (!read) await reader.cancel().catch(() => {}); // a walk that stopped early lets the connection go
              reader.releaseLock();
            }
          }
          if (want !== undefined && n !== want) {
            throw new WebhookdError(`webhookd: GET ${r.path}: got ${n} bytes of ${want}`);
          }
        } finally {
          done();
        }
      },
    };
  }
}
