import { WebhookdError } from "./problem.js";
import type { Cursor, FeedEvent, Page } from "./types.js";

/**
 * A walk of one listing: `for await (const d of listing)` yields every
 * item, asking for one page at a time and following the server's
 * next_cursor while has_more is true. Nothing is sent until it is walked;
 * each walk starts afresh from the listing's first cursor. A failed page
 * rejects the walk (a Problem, or a WebhookdError).
 */
export class Listing<T> implements AsyncIterable<T> {
  readonly #page: (cursor: string | undefined) => Promise<Page<T>>;
  readonly #start: string | undefined;
  readonly #what: string;

  /** @internal Made by the client's list methods. */
  constructor(what: string, start: Cursor, page: (cursor: string | undefined) => Promise<Page<T>>) {
    this.#what = what;
    this.#start = start || undefined;
    this.#page = page;
  }

  /** Yields each page, from the first, while the one before said has_more. */
  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let cursor = this.#start;
    for (;;) {
      const p = await this.#page(cursor);
      yield p;
      if (!p.has_more) return;
      if (p.next_cursor === null || p.next_cursor === "" || p.next_cursor === cursor) {
        throw new WebhookdError(`webhookd: GET ${this.#what}: the server answered has_more without a new next_cursor`);
      }
      cursor = p.next_cursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const p of this.pages()) yield* p.data;
  }

  /** Every item, in one array: for listings known to be small. */
  async all(): Promise<T[]> {
    const out: T[] = [];
    for await (const it of this) out.push(it);
    return out;
  }
}

/**
 * A walk of a tenant's reconciliation feed: its events in ingest order,
 * each with the envelope exactly as delivered. Unlike a Listing it ends at
 * the end of the log for now; cursor then says where to resume, in a later
 * walk of this Feed or in a new one (`client.events.feed(tenant, {cursor})`),
 * to read only what was ingested since. One walk at a time.
 */
export class Feed implements AsyncIterable<FeedEvent> {
  readonly #page: (cursor: string | undefined) => Promise<{ data: FeedEvent[]; next_cursor: string; has_more: boolean }>;
  readonly #what: string;
  #cursor: string;

  /** @internal Made by client.events.feed. */
  constructor(
    what: string,
    start: Cursor,
    page: (cursor: string | undefined) => Promise<{ data: FeedEvent[]; next_cursor: string; has_more: boolean }>,
  ) {
    this.#what = what;
    this.#cursor = start ?? "";
    this.#page = page;
  }

  /** Where to resume: after the last event a walk yielded, or as far as the server said the log was read; the filter's cursor before the first page. */
  get cursor(): string {
    return this.#cursor;
  }

  /** Walks from cursor to the end of the log; walking again continues from where the last walk stopped. A failed page rejects the walk, and cursor is still where to resume. */
  async *[Symbol.asyncIterator](): AsyncGenerator<FeedEvent, void, undefined> {
    for (;;) {
      const before = this.#cursor;
      const p = await this.#page(before || undefined);
      for (const ev of p.data) {
        this.#cursor = ev.cursor;
        yield ev;
      }
      if (p.next_cursor !== "") this.#cursor = p.next_cursor;
      if (!p.has_more) return;
      if (this.#cursor === before) {
        throw new WebhookdError(`webhookd: GET ${this.#what}: the server answered has_more without a new next_cursor`);
      }
    }
  }

  /** Every event from cursor to the end of the log, in one array. */
  async all(): Promise<FeedEvent[]> {
    const out: FeedEvent[] = [];
    for await (const ev of this) out.push(ev);
    return out;
  }
}
