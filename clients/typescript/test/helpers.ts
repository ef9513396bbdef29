// What the tests share: the server they run against, loopback receivers
// that verify every signature, a fault-injecting proxy in front of the
// real server, and a bounded poller.
//
// The suite runs against a real webhookd: e2e/client_typescript_test.go
// starts one on a loopback port with a fresh database and sets
// WEBHOOKD_URL and WEBHOOKD_TOKEN (an admin token). Without them the
// tests that need a server are skipped. Each file uses a tenant and
// event types of its own, named with a random suffix, so the files may
// run at once and again on the same server.

import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { type IncomingMessage, type Server, type ServerResponse, createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";

import { Client, type ClientOptions } from "../src/index.js";

/** The server under test, or why there is none. */
export const server: { url: string; token: string } | undefined =
  process.env["WEBHOOKD_URL"] && process.env["WEBHOOKD_TOKEN"]
    ? { url: process.env["WEBHOOKD_URL"], token: process.env["WEBHOOKD_TOKEN"] }
    : undefined;

/** The skip option of a test that needs the server. */
export const needsServer: { skip: string | false } = {
  skip: server === undefined ? "WEBHOOKD_URL and WEBHOOKD_TOKEN are not set (go test -run TestClientTypeScript ./e2e sets them)" : false,
};

/** The server's base URL; only called in tests that needsServer lets run. */
export function serverURL(): string {
  if (server === undefined) throw new Error("no server");
  return server.url;
}

/** A client of the server (or of base) with the admin token, unless options say otherwise. */
export function adminClient(options: ClientOptions = {}, base: string = serverURL()): Client {
  return new Client(base, { token: server?.token, ...options });
}

/** A name no earlier run used: prefix and 8 hex digits. */
export function unique(prefix: string): string {
  return `${prefix}${randomBytes(4).toString("hex")}`;
}

/** Calls cond every 20 ms until it returns a value other than undefined, for at most limitMs; throws saying what it waited for. */
export async function poll<T>(what: string, cond: () => Promise<T | undefined>, limitMs = 15_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const v = await cond();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${limitMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** One request a receiver got. */
export interface Received {
  path: string;
  headers: IncomingMessage["headers"];
  body: Buffer;
  /** The secrets (of those the receiver was given) whose signature the request carries. */
  verifiedWith: string[];
}

/** What a receiver answers: a status, and optional headers and body. */
export type Answerer = (req: Received, n: number) => { status: number; headers?: Record<string, string>; body?: string };

/** A loopback HTTP server that records and verifies each webhook it gets. */
export interface Receiver {
  url: string;
  got: Received[];
  /** The signing secrets it verifies with; set after the endpoint is made. */
  secrets: string[];
  answer: Answerer;
  close(): Promise<void>;
}

/** Starts a receiver on 127.0.0.1 that answers with answer (default 204). */
export async function startReceiver(answer: Answerer = () => ({ status: 204 })): Promise<Receiver> {
  const rc: Receiver = {
    url: "",
    got: [],
    secrets: [],
    answer,
    close: () => closeServer(srv),
  };
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const r: Received = { path: req.url ?? "", headers: req.headers, body, verifiedWith: rc.secrets.filter((s) => signedWith(s, req.headers, body)) };
      rc.got.push(r);
      const challenge = header(req.headers, "webhook-challenge");
      if (challenge !== undefined && rc.secrets[0] !== undefined) {
        res.writeHead(200, { "webhook-challenge-response": challengeResponse(rc.secrets[0], challenge) });
        res.end();
        return;
      }
      const a = rc.answer(r, rc.got.length);
      res.writeHead(a.status, a.headers);
      res.end(a.body);
    });
  });
  srv.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  rc.url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  return rc;
}

/** Stops srv and ends its connections, idle or not: a test never waits on a peer's keep-alive. */
function closeServer(srv: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    srv.close(() => resolve());
    srv.closeAllConnections();
  });
}

function header(h: IncomingMessage["headers"], name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

function keyOf(secret: string): Buffer {
  return Buffer.from(secret.replace(/^whsec_/, ""), "base64");
}

/** The Standard Webhooks signature of body: v1,base64(HMAC-SHA256(key, id.timestamp.body)). */
export function standardSignature(secret: string, id: string, timestamp: string, body: Buffer): string {
  const mac = createHmac("sha256", keyOf(secret)).update(`${id}.${timestamp}.`).update(body).digest("base64");
  return `v1,${mac}`;
}

/** Reports whether the webhook with headers h and body carries a valid signature of secret, made within five minutes. */
export function signedWith(secret: string, h: IncomingMessage["headers"], body: Buffer): boolean {
  const id = header(h, "webhook-id");
  const ts = header(h, "webhook-timestamp");
  const sigs = header(h, "webhook-signature");
  if (id === undefined || ts === undefined || sigs === undefined) return false;
  if (Math.abs(Date.now() / 1000 - Number(ts)) > 300) return false;
  const want = Buffer.from(standardSignature(secret, id, ts, body));
  return sigs.split(" ").some((s) => {
    const got = Buffer.from(s);
    return got.length === want.length && timingSafeEqual(got, want);
  });
}

/** The endpoint-verification answer to challenge: v1,base64(HMAC-SHA256(HMAC-SHA256(key, "wev-v1"), challenge)). */
function challengeResponse(secret: string, challenge: string): string {
  const vk = createHmac("sha256", keyOf(secret)).update("wev-v1").digest();
  return `v1,${createHmac("sha256", vk).update(challenge).digest("base64")}`;
}

/** A fault a proxy answers with instead of the server: status and Retry-After, a problem+json body unless plain; with forward, the server handles the request first and its answer is replaced. */
export interface Fault {
  status: number;
  retryAfter?: string;
  forward?: boolean;
  plain?: boolean;
}

/** A proxy in front of the real server that answers with faults. */
export interface Proxy {
  url: string;
  /** Every request it got, in order: method, path and headers. */
  got: { method: string; path: string; headers: IncomingMessage["headers"] }[];
  close(): Promise<void>;
}

/** Starts a proxy on 127.0.0.1 to the server; fault says, for its n-th request (1-based), what fault to answer with (undefined: none). */
export async function startProxy(fault: (n: number) => Fault | undefined): Promise<Proxy> {
  const target = new URL(serverURL());
  const p: Proxy = { url: "", got: [], close: () => closeServer(srv) };
  const srv = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      p.got.push({ method: req.method ?? "", path: req.url ?? "", headers: req.headers });
      const f = fault(p.got.length);
      const answerFault = (ff: Fault) => {
        const h: Record<string, string> = {};
        if (ff.retryAfter !== undefined) h["retry-after"] = ff.retryAfter;
        if (ff.plain) {
          res.writeHead(ff.status, { ...h, "content-type": "text/plain; charset=utf-8" });
          res.end("bad gateway\n");
          return;
        }
        res.writeHead(ff.status, { ...h, "content-type": "application/problem+json" });
        res.end(JSON.stringify({ type: "urn:webhookd:problem:unavailable", title: "Service unavailable", status: ff.status, code: "unavailable", detail: "try again" }));
      };
      if (f !== undefined && !f.forward) {
        answerFault(f);
        return;
      }
      const up = httpRequest(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } },
        (ur) => {
          if (f !== undefined) {
            ur.resume();
            ur.on("end", () => answerFault(f));
            return;
          }
          res.writeHead(ur.statusCode ?? 502, ur.headers);
          ur.pipe(res);
        },
      );
      up.on("error", (err) => {
        res.writeHead(502);
        res.end(String(err));
      });
      up.end(Buffer.concat(chunks));
    });
  });
  srv.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  p.url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  return p;
}

/** fault for the first request only. */
export function firstOnly(f: Fault): (n: number) => Fault | undefined {
  return (n) => (n === 1 ? f : undefined);
}
