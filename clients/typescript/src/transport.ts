import { type Problem, WebhookdError, problemOf } from "./problem.js";
import type { CallOptions } from "./types.js";

/** The defaults of the ClientOptions whose absence means "the default". */
export const defaultMaxAttempts = 3;
export const defaultMaxRetryWaitMs = 30_000;
export const defaultUserAgent = "webhookd-typescript-client";

/** How a Client is made. Each member's comment says what its absence means. */
export interface ClientOptions {
  /**
   * The bearer token sent with every request: an admin or test token from
   * the server's configuration, or a tenant access token
   * (accessTokens.issue). Absent or "": no Authorization header (only
   * health and ready work then).
   */
  token?: string | undefined;
  /**
   * Bounds the attempts of a request that may be retried, the first
   * included: every GET but ready, every PUT and DELETE, and ingest,
   * which always sends an Idempotency-Key. Absent or 0: 3; 1 or less: no
   * retries.
   */
  maxAttempts?: number | undefined;
  /**
   * The longest wait, in milliseconds, the client makes before a retry. An
   * answer asking for a longer wait is thrown as it is, a Problem with its
   * retryAfterMs. Absent: 30 000.
   */
  maxRetryWaitMs?: number | undefined;
  /** Bounds each attempt, in milliseconds, including the reading of its answer. Absent or 0: no bound but the signal's. */
  timeoutMs?: number | undefined;
  /** The User-Agent header. Absent: "webhookd-typescript-client". */
  userAgent?: string | undefined;
  /** The fetch the requests are sent with. Absent: the global fetch (Node 18 and later). */
  fetch?: typeof fetch | undefined;
}

/** One call of the API. */
export interface Request {
  method: "GET" | "PUT" | "POST" | "PATCH" | "DELETE";
  /** Escaped, from the root: "/v1/tenants/acme". */
  path: string;
  /** Members undefined, null or "" are left out; arrays repeat the parameter. */
  query?: Record<string, unknown> | undefined;
  /** Sent as JSON; undefined: no body. */
  body?: unknown;
  headers?: Record<string, string> | undefined;
  /**
   * A GET or POST safe to repeat: a 429 or 503 answer is retried (see
   * Transport.send). A PUT or DELETE is repeated without it.
   */
  retry?: boolean | undefined;
}

/**
 * Whether a 429 or 503 answer to r may be retried: r says so (a GET, an
 * ingest with its Idempotency-Key), or its method is idempotent (RFC 9110
 * §9.2.2), so a repeat leaves the server as one request would, also when
 * the first attempt took effect.
 */
function repeatable(r: Request): boolean {
  return r.retry === true || r.method === "PUT" || r.method === "DELETE";
}

/** Sends requests to one server, with the client's token and retry policy. */
export class Transport {
  readonly base: string;
  readonly #token: string;
  readonly #maxAttempts: number;
  readonly #maxRetryWaitMs: number;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #fetch: typeof fetch;

  constructor(baseUrl: string, o: ClientOptions) {
    let u: URL;
    try {
      u = new URL(baseUrl);
    } catch (err) {
      throw new WebhookdError(`webhookd: base URL ${JSON.stringify(baseUrl)}: not a URL`, { cause: err });
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
      throw new WebhookdError(`webhookd: base URL ${JSON.stringify(baseUrl)}: want http:// or https:// and a host`);
    }
    if (u.search !== "" || u.hash !== "") {
      throw new WebhookdError(`webhookd: base URL ${JSON.stringify(baseUrl)}: want no query or fragment`);
    }
    this.base = u.toString().replace(/\/+$/, "");
    this.#token = o.token ?? "";
    const max = o.maxAttempts ?? 0;
    this.#maxAttempts = max === 0 ? defaultMaxAttempts : Math.max(1, Math.floor(max));
    this.#maxRetryWaitMs = o.maxRetryWaitMs !== undefined && o.maxRetryWaitMs >= 0 ? o.maxRetryWaitMs : defaultMaxRetryWaitMs;
    this.#timeoutMs = o.timeoutMs ?? 0;
    this.#userAgent = o.userAgent || defaultUserAgent;
    const f = o.fetch ?? globalThis.fetch;
    if (typeof f !== "function") {
      throw new WebhookdError("webhookd: no fetch: use Node 18 or later, or pass options.fetch");
    }
    this.#fetch = f;
  }

  /**
   * Makes r and returns the answer to its last attempt, whose status is
   * 2xx, or rejects: with a Problem for an answer outside 2xx, a
   * WebhookdError when the server could not be reached or did not answer
   * within timeoutMs, the signal's reason when it aborted. The caller reads
   * the answer's body, then calls done (which ends the attempt's timeout).
   *
   * A repeatable request is repeated after a 429 or 503 while attempts
   * remain and the wait the answer asks for (Retry-After; 1 s, doubling,
   * when it names none) is at most maxRetryWaitMs.
   */
  async send(r: Request, call?: CallOptions): Promise<{ res: Response; done: () => void }> {
    const body = r.body === undefined ? undefined : JSON.stringify(r.body);
    const url = this.base + r.path + queryString(r.query);
    const signal = call?.signal;
    let backoff = 1000;
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const { res, done } = await this.#attempt(r, url, body, signal);
      if (res.ok) return { res, done };
      let p: Problem;
      try {
        p = await problemOf(res);
      } finally {
        done();
      }
      const retryable = res.status === 429 || res.status === 503;
      if (!repeatable(r) || !retryable || attempt >= this.#maxAttempts) throw p;
      let wait = p.retryAfterMs;
      if (wait === undefined) {
        wait = backoff;
        backoff *= 2;
      }
      if (wait > this.#maxRetryWaitMs) throw p;
      await sleep(wait, signal);
    }
  }

  /** Makes r and returns its answer's text, for the caller to decode; "" for an answer with no body (204). */
  async text(r: Request, call?: CallOptions): Promise<{ res: Response; text: string }> {
    const { res, done } = await this.send(r, call);
    try {
      return { res, text: await res.text() };
    } catch (err) {
      throw this.#failed(r, "read answer", err, call?.signal);
    } finally {
      done();
    }
  }

  /** Makes r and returns its JSON answer; undefined for an answer with no body (204). */
  async json<T>(r: Request, call?: CallOptions): Promise<T> {
    const { text } = await this.text(r, call);
    return this.parse<T>(r, text);
  }

  /** Decodes the JSON text of r's answer; undefined for "". */
  parse<T>(r: Request, text: string): T {
    if (text === "") return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw this.#failed(r, "decode answer", err);
    }
  }

  /** Sends r once. */
  async #attempt(
    r: Request,
    url: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ res: Response; done: () => void }> {
    const headers: Record<string, string> = {
      ...r.headers,
      accept: "application/json, application/problem+json",
      "user-agent": this.#userAgent,
    };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.#token !== "") headers["authorization"] = `Bearer ${this.#token}`;
    const b = bound(signal, this.#timeoutMs);
    const init: RequestInit = { method: r.method, headers, redirect: "manual", signal: b.signal };
    if (body !== undefined) init.body = body;
    try {
      return { res: await this.#fetch(url, init), done: b.done };
    } catch (err) {
      b.done();
      throw this.#failed(r, "", err, signal);
    }
  }

  /** The error of a request that got no whole answer: the caller's abort reason as it is, else a WebhookdError. */
  #failed(r: Request, what: string, cause: unknown, signal?: AbortSignal): unknown {
    if (signal?.aborted) return signal.reason;
    const why = cause instanceof Error ? causeMessage(cause) : String(cause);
    return new WebhookdError(`webhookd: ${r.method} ${r.path}: ${what ? `${what}: ` : ""}${why}`, { cause });
  }
}

/** The message of err and of its causes ("fetch failed: connect ECONNREFUSED 127.0.0.1:1"). */
function causeMessage(err: Error): string {
  let m = err.message;
  for (let c: unknown = err.cause, n = 0; c instanceof Error && n < 4; c = c.cause, n++) {
    if (c.message && !m.includes(c.message)) m += `: ${c.message}`;
  }
  return m;
}

/**
 * An AbortSignal that aborts when signal does, or after timeoutMs (0:
 * never) with an Error saying so; done lets go of its timer and listener.
 */
function bound(signal: AbortSignal | undefined, timeoutMs: number): { signal: AbortSignal; done: () => void } {
  const c = new AbortController();
  const onAbort = () => c.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) onAbort();
  const timer =
    timeoutMs > 0 ? setTimeout(() => c.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs) : undefined;
  timer?.unref();
  return {
    signal: c.signal,
    done: () => {
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    },
  };
}

/** ?a=1&b=2 of the members of q that are set; "" when none is. */
export function queryString(q: Record<string, unknown> | undefined): string {
  if (q === undefined) return "";
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    for (const one of Array.isArray(v) ? v : [v]) {
      if (one === undefined || one === null || one === "") continue;
      p.append(k, one instanceof Date ? one.toISOString() : String(one));
    }
  }
  const s = p.toString();
  return s === "" ? "" : `?${s}`;
}

/** Waits ms, or rejects with signal's reason when it aborts first. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** "/" + each segment escaped. */
export function path(...segments: string[]): string {
  return segments.map((s) => `/${encodeURIComponent(s)}`).join("");
}
