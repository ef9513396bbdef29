// Walking a listing: with for await, the client follows the cursors; in
// a loop of one's own (to keep the cursor between runs, say), a page's
// next_cursor goes back in as the cursor as it is, null included: no
// cast, also under exactOptionalPropertyTypes.

import { type Client, type Delivery } from "../src/index.js"; // in your code: from "@webhookd/client"

/** Every dead letter of tenant, walked by the client. */
export async function deadLetters(client: Client, tenant: string): Promise<Delivery[]> {
  const out: Delivery[] = [];
  for await (const d of client.deliveries.list(tenant, { state: "dead", limit: 100 })) out.push(d);
  return out;
}

/** The same, one page at a time: next_cursor is null on the last page. */
export async function deadLettersByPage(client: Client, tenant: string): Promise<Delivery[]> {
  const out: Delivery[] = [];
  let cursor: string | null = null;
  do {
    const page = await client.deliveries.page(tenant, { state: "dead", limit: 100, cursor });
    out.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor !== null);
  return out;
}

/** Or with the cursor kept as string | undefined: ?? undefined is all it takes. */
export async function deadLetterIDs(client: Client, tenant: string, limit?: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await client.deadLetters.page(tenant, { cursor, limit });
    ids.push(...page.data.map((d) => d.id));
    if (!page.has_more) return ids;
    cursor = page.next_cursor ?? undefined;
  }
}
