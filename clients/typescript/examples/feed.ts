// Reconciliation: read every event since the last run from the feed, and
// keep its cursor for the next run. Each entry carries the envelope's
// exact text, whose bytes the signatures cover.

import { createHash } from "node:crypto";

import { Client } from "../src/index.js"; // in your code: from "@webhookd/client"

/** Reads tenant's events after cursor (""/undefined: from the first); returns their ids, each envelope's SHA-256, and where to resume. */
export async function catchUp(
  client: Client,
  tenant: string,
  cursor: string | undefined,
): Promise<{ ids: string[]; sha256: string[]; cursor: string }> {
  const feed = client.events.feed(tenant, { cursor });
  const ids: string[] = [];
  const sha256: string[] = [];
  for await (const e of feed) {
    if (e.test) continue; // a test event was meant for one endpoint only
    ids.push(e.event.id);
    sha256.push(createHash("sha256").update(e.rawEvent).digest("hex"));
  }
  return { ids, sha256, cursor: feed.cursor };
}
