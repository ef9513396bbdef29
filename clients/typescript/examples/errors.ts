// Errors: every error answer is a Problem; match on its code (stable),
// read its field, never parse its detail. 429 and 503 are retried for
// you on GETs and ingests (bounded by maxAttempts and maxRetryWaitMs).

import { Client, Problem, WebhookdError } from "../src/index.js"; // in your code: from "@webhookd/client"

/** Ingests an event, and says in a word what went wrong when it did not go. */
export async function send(baseUrl: string, token: string | undefined, tenant: string, type: string, data: unknown): Promise<string> {
  const client = new Client(baseUrl, { token, maxAttempts: 5, maxRetryWaitMs: 10_000, timeoutMs: 30_000 });
  try {
    const res = await client.events.ingest(tenant, { type, data }, { idempotencyKey: `order-${type}-42` });
    return res.replayed ? `already sent as ${res.id}` : `sent as ${res.id}`;
  } catch (err) {
    if (Problem.is(err, "unknown_event_type")) return `add ${type} to the catalogue first (field ${err.field ?? "?"})`;
    if (Problem.is(err, "invalid_field", "invalid_json")) return `fix ${err.field ?? "the body"}: ${err.detail}`;
    if (Problem.is(err, "rate_limited", "tenant_overloaded", "overloaded", "unavailable")) {
      return `busy: try again in ${Math.ceil((err.retryAfterMs ?? 1000) / 1000)} s`;
    }
    if (Problem.is(err)) return `refused: ${err.status} ${err.code}`;
    if (err instanceof WebhookdError) return `unreachable: ${err.message}`;
    throw err;
  }
}
