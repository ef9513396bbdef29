// The README's example: a tenant, an event type, an endpoint, an event,
// and the walk of what did not arrive. Each example is a function the
// tests run against a real webhookd (test/examples.test.ts), and a
// program: node build/examples/quickstart.js with WEBHOOKD_URL and
// WEBHOOKD_TOKEN set.

import { Client } from "../src/index.js"; // in your code: from "@webhookd/client"

export async function quickstart(baseUrl: string, token: string | undefined, receiverUrl: string): Promise<string> {
  const client = new Client(baseUrl, { token });
  await client.tenants.put("acme", { name: "Acme" });
  await client.eventTypes.put("invoice.paid", { description: "An invoice was paid." });
  await client.endpoints.create("acme", { url: receiverUrl, event_types: ["invoice.paid"] });
  const event = await client.events.ingest("acme", { type: "invoice.paid", data: { invoice: "in_1" } });
  for await (const d of client.deliveries.list("acme", { state: "dead" })) console.log(d.id, d.reason);
  return event.id;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(await quickstart(process.env.WEBHOOKD_URL ?? "http://127.0.0.1:8080", process.env.WEBHOOKD_TOKEN, "https://example.com/hooks"));
}
