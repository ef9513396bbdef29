// @webhookd/client: a typed client of webhookd's HTTP API. ESM, no runtime
// dependencies, Node 18's fetch. See README.md.

export { Client, Tenants, EventTypes, RetryPolicies, Endpoints, Events, Deliveries, DeadLetters, Reports, AccessTokens, PortalLinks, OperationalEndpoints, Tasks, Admin } from "./client.js";
export { Problem, WebhookdError, parseRetryAfter } from "./problem.js";
export type { Code, ProblemInit } from "./problem.js";
export { Listing, Feed } from "./paging.js";
export { defaultMaxAttempts, defaultMaxRetryWaitMs, defaultUserAgent } from "./transport.js";
export type { ClientOptions } from "./transport.js";
export type * from "./types.js";
export type { components, operations, paths, webhooks } from "./openapi.js";
