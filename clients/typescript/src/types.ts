// The shapes of the API, by name. Every one is taken from src/openapi.ts,
// which openapi-typescript generates from httpapi/openapi.json (npm run
// generate): nothing here restates a field, so a change of the document
// changes these types, and code that no longer fits it fails to compile.
//
// Answers keep the document's snake_case names, as the server writes them.
// The few things the client adds itself (an ingest's idempotencyKey and
// replayed, an event's rawEvent) and the client's own options are
// camelCase.

import type { components, operations } from "./openapi.js";

type Schemas = components["schemas"];

/** The JSON body of answer status S of operation K. */
export type Answer<K extends keyof operations, S extends keyof operations[K]["responses"]> = JSONContent<
  operations[K]["responses"][S]
>;

/** The JSON request body operation K takes. */
export type Body<K extends keyof operations> = operations[K] extends { requestBody?: infer B }
  ? JSONContent<NonNullable<B>>
  : never;

/** The query parameters operation K takes. */
export type Query<K extends keyof operations> = NonNullable<operations[K]["parameters"]["query"]>;

type JSONContent<R> = R extends { content: { "application/json": infer T } } ? T : never;

/** Every member optional, and undefined allowed where it is: an options object built from variables that may be unset type-checks under exactOptionalPropertyTypes. */
export type Loose<T> = { [K in keyof T]?: T[K] | undefined };

/**
 * The cursor a listing starts after: a page's next_cursor, as it is.
 * null, undefined and "" start at the beginning, so that the loop
 * `cursor = page.next_cursor` type-checks without a cast, although the
 * document (truthfully) types next_cursor `string | null` and the query
 * parameter `string`.
 */
export type Cursor = string | null | undefined;

/** Paging of a listing: its page size and where to start. */
export type Paging<K extends keyof operations> = Loose<Omit<Query<K>, "cursor">> & { cursor?: Cursor };

export type ProblemCode = Schemas["ProblemCode"];
export type Environment = Schemas["Environment"];
export type Ordering = Schemas["Ordering"];
export type OnDead = Schemas["OnDead"];
export type DeliveryState = Schemas["DeliveryState"];
export type Timestamp = Schemas["Timestamp"];

export type Tenant = Schemas["Tenant"];
export type TenantInput = Schemas["TenantInput"];
export type EventType = Schemas["EventType"];
export type EventTypeInput = Schemas["EventTypeInput"];
export type RetryPolicy = Schemas["RetryPolicy"];
export type Endpoint = Schemas["Endpoint"];
export type EndpointInput = Schemas["EndpointInput"];
export type EndpointPatch = Schemas["EndpointPatch"];
export type CreatedEndpoint = Schemas["CreatedEndpoint"];
export type RateLimit = Schemas["RateLimit"];
export type RateLimitInput = Schemas["RateLimitInput"];
export type RotateInput = Schemas["RotateInput"];
export type SecretAnswer = Schemas["SecretAnswer"];
export type RevealAnswer = Schemas["RevealAnswer"];
export type Verification = Schemas["Verification"];
export type TestEventInput = Schemas["TestEventInput"];
export type TestEventAnswer = Schemas["TestEventAnswer"];
export type BackfillInput = Schemas["BackfillInput"];
export type IngestInput = Schemas["IngestInput"];
export type IngestAnswer = Schemas["IngestAnswer"];
export type DeliveryRef = Schemas["DeliveryRef"];
export type Envelope = Schemas["Envelope"];
export type EventAnswer = Schemas["EventAnswer"];
export type FeedEntry = Schemas["FeedEntry"];
export type FeedPage = Schemas["FeedPage"];
export type Delivery = Schemas["Delivery"];
export type Attempt = Schemas["Attempt"];
export type ReplayRangeInput = Schemas["ReplayRangeInput"];
export type Report = Schemas["Report"];
export type TenantsReport = Schemas["TenantsReport"];
export type AccessToken = Schemas["AccessToken"];
export type AccessTokenInput = Schemas["AccessTokenInput"];
export type IssuedToken = Schemas["IssuedToken"];
export type PortalLinkInput = Schemas["PortalLinkInput"];
export type PortalLink = Schemas["PortalLink"];
export type OperationalEventType = Schemas["OperationalEventType"];
export type OperationalEndpoint = Schemas["OperationalEndpoint"];
export type OperationalEndpointInput = Schemas["OperationalEndpointInput"];
export type OperationalEndpointPatch = Schemas["OperationalEndpointPatch"];
export type CreatedOperationalEndpoint = Schemas["CreatedOperationalEndpoint"];
export type OperationalSecretAnswer = Schemas["OperationalSecretAnswer"];
export type Task = Schemas["Task"];
export type TaskKind = Schemas["TaskKind"];
export type TaskState = Schemas["TaskState"];
export type TaskParams = Schemas["TaskParams"];

export type TenantPage = Answer<"listTenants", 200>;
export type EventTypePage = Answer<"listEventTypes", 200>;
export type RetryPolicyPage = Answer<"listRetryPolicies", 200>;
export type EndpointPage = Answer<"listEndpoints", 200>;
export type DeliveryPage = Answer<"listDeliveries", 200>;
export type DeadLetterPage = Answer<"listDeadLetters", 200>;
export type AccessTokenPage = Answer<"listAccessTokens", 200>;
export type OperationalEndpointPage = Answer<"listOperationalEndpoints", 200>;
export type TaskPage = Answer<"listTasks", 200>;

/** Paging of the listings that take no filter. */
export type ListOptions = Paging<"listTenants">;
/** What the delivery log is filtered by, and its paging. */
export type DeliveryFilter = Paging<"listDeliveries">;
/** What the reconciliation feed is filtered by, and its page size; cursor resumes it after an event. */
export type FeedFilter = Paging<"listEvents">;

/** What Client.tasks.wait takes besides the task. */
export interface WaitOptions extends CallOptions {
  /** Milliseconds between two reads of the task; undefined: 500. */
  pollMs?: number | undefined;
}

/** What every call takes besides its arguments. */
export interface CallOptions {
  /** Ends the request, and any wait between retries, when it aborts: the call rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
}

/** What Client.events.ingest takes besides the event. */
export interface IngestOptions extends CallOptions {
  /**
   * Makes the ingest safe to repeat: the server stores one event per key
   * (within its idempotency window) and answers a repeat with the first.
   * undefined or "": the client generates a random key, and sends the same
   * one on every retry.
   */
  idempotencyKey?: string | undefined;
}

/** The answer of an ingest, with what the client knows of it. */
export type IngestResult = IngestAnswer & {
  /** The key the event was sent with: the caller's, or the one the client generated. */
  idempotencyKey: string;
  /** The server had stored this key already and answered with that event rather than storing a new one (Idempotent-Replayed: true). */
  replayed: boolean;
};

/** An event with its deliveries, and its envelope's exact text. */
export type EventDetail = EventAnswer & {
  /** The envelope exactly as stored, signed and sent: a signature covers these bytes (Buffer.from(rawEvent)), not JSON.stringify(event). */
  rawEvent: string;
};

/** An entry of the reconciliation feed, and its envelope's exact text. */
export type FeedEvent = FeedEntry & {
  /** The envelope exactly as stored, signed and sent (see EventDetail.rawEvent). */
  rawEvent: string;
};

/** A one-page answer of a listing. */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
  has_more: boolean;
}
