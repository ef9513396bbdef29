import type { ProblemCode } from "./types.js";

/**
 * The stable, machine-readable kind of a Problem: the code member of the
 * server's problem+json answer. Match on it, never on detail, whose
 * wording may change. The document's codes complete in an editor; a code
 * a newer server answers with is still a string here, and "" stands for
 * an answer that was not problem+json.
 */
export type Code = ProblemCode | "" | (string & {});

/** What a Problem is made of. */
export interface ProblemInit {
  status: number;
  code: Code;
  title: string;
  detail: string;
  field?: string | undefined;
  type?: string | undefined;
  retryAfterMs?: number | undefined;
}

/**
 * An error answer of the API: RFC 9457 problem details with webhookd's
 * stable code and the field at fault. Every call rejects with one for
 * every answer outside 2xx:
 *
 *     try { await client.events.ingest("acme", { type: "nope", data: {} }) }
 *     catch (err) {
 *       if (Problem.is(err, "unknown_event_type")) console.log(err.field) // "type"
 *       else throw err
 *     }
 *
 * An error answer that is not problem+json (from a proxy in front of the
 * server, say) is a Problem too, with code "", the status text as title
 * and the start of the body as detail.
 */
export class Problem extends Error {
  override readonly name = "Problem";
  /** The HTTP status of the answer (whatever the body says). */
  readonly status: number;
  /** The kind of problem; "" when the answer was not problem+json. */
  readonly code: Code;
  /** A short summary of the code, the same for every problem with it. */
  readonly title: string;
  /** What went wrong with this request, for a person. */
  readonly detail: string;
  /** The request field, query parameter or header at fault; undefined when there is none. */
  readonly field: string | undefined;
  /** The problem's URI: "urn:webhookd:problem:" + code; "" when the answer was not problem+json. */
  readonly type: string;
  /** The answer's Retry-After (429 and 503), in milliseconds: how long to wait before trying again; undefined when it had none. */
  readonly retryAfterMs: number | undefined;

  constructor(init: ProblemInit) {
    super(problemMessage(init));
    this.status = init.status;
    this.code = init.code;
    this.title = init.title;
    this.detail = init.detail;
    this.field = init.field;
    this.type = init.type ?? "";
    this.retryAfterMs = init.retryAfterMs;
  }

  /** Reports whether err is a Problem, and of one of codes when any are given. */
  static is(err: unknown, ...codes: Code[]): err is Problem {
    return err instanceof Problem && (codes.length === 0 || codes.includes(err.code));
  }
}

/** Like "webhookd: 422 unknown_event_type: event type ... (field type)". */
function problemMessage(p: ProblemInit): string {
  let m = `webhookd: ${p.status}`;
  if (p.code !== "") m += ` ${p.code}`;
  if (p.detail !== "") m += `: ${p.detail}`;
  else if (p.title !== "") m += `: ${p.title}`;
  if (p.field !== undefined && p.field !== "") m += ` (field ${p.field})`;
  return m;
}

/**
 * An error of the client itself, not an answer of the API: the server
 * could not be reached (cause holds the transport's error), an answer was
 * not the JSON expected, or a listing's cursor did not move on.
 */
export class WebhookdError extends Error {
  override readonly name = "WebhookdError";
}

/** How much of an error answer is read. */
const maxProblemBody = 64 << 10;
/** How much of an answer that is not problem+json becomes the detail. */
const maxDetailExcerpt = 512;

/** Reads the error answer res (status outside 2xx) into a Problem. */
export async function problemOf(res: Response, now: number = Date.now()): Promise<Problem> {
  const body = await readCapped(res, maxProblemBody);
  const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"), now);
  const mediaType = (res.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (mediaType === "application/problem+json") {
    const p = parseObject(body);
    if (p !== undefined) {
      return new Problem({
        status: res.status,
        code: str(p["code"]),
        title: str(p["title"]),
        detail: str(p["detail"]),
        field: typeof p["field"] === "string" && p["field"] !== "" ? p["field"] : undefined,
        type: str(p["type"]),
        retryAfterMs,
      });
    }
  }
  return new Problem({
    status: res.status,
    code: "",
    title: res.statusText || `HTTP ${res.status}`,
    detail: body.slice(0, maxDetailExcerpt).trim(),
    retryAfterMs,
  });
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Reads at most limit bytes of res's body as text, and lets go of the rest. */
async function readCapped(res: Response, limit: number): Promise<string> {
  if (res.body === null) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  try {
    while (n < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      n += value.byteLength;
    }
  } catch {
    // A body cut short: what arrived is the detail.
  } finally {
    reader.cancel().catch(() => {});
  }
  const all = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all.subarray(0, Math.min(n, limit)));
}

/**
 * Parses a Retry-After header, in seconds or an HTTP date (RFC 9110
 * §10.2.3), as a wait in milliseconds from now; undefined when v is
 * missing or invalid. A date in the past is a wait of 0.
 */
export function parseRetryAfter(v: string | null | undefined, now: number = Date.now()): number | undefined {
  if (v === null || v === undefined) return undefined;
  const s = v.trim();
  if (/^\d+$/.test(s)) return Math.min(Number(s), 2 ** 31) * 1000;
  if (!/^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(s)) return undefined;
  const t = Date.parse(s);
  return Number.isNaN(t) ? undefined : Math.max(t - now, 0);
}
