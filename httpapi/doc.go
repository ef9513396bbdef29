// Package httpapi serves the webhookd API over HTTP: JSON in, JSON out, and
// every error as an RFC 9457 problem. It turns requests into calls on an
// *engine.Service and engine errors into statuses; it holds no state of its
// own and never imports storage.
//
// # Routes
//
// GET /healthz answers 200 {"status":"ok"} and needs no token, and so does
// GET /v1/openapi.json, the OpenAPI 3.1 document of every route below
// (openapi.json in this package). Every other /v1 route needs "Authorization: Bearer <token>" with one of Options.Tokens
// (live) or Options.TestTokens (test). A test token may use the routes
// under /v1/tenants/:tenant of test tenants only, may create test tenants,
// and may read the event catalogue; anything else answers 403 forbidden
// (see security.go).
//
//	GET    /v1/tenants                                ?cursor=&limit= (admin) → 200 a page of tenants
//	PUT    /v1/tenants/:tenant                        {"name"} (body optional) → 201 created / 200 updated, the tenant; 409 tenant_deleting while a deleted tenant of that id is purged
//	GET    /v1/tenants/:tenant                        → 200 the tenant
//	DELETE /v1/tenants/:tenant                        ?force=true → 202 {"task"}: its purge; 409 pending_deliveries while deliveries are pending, unless forced
//	PUT    /v1/event-types/:type                      {"description"} (body optional) → 201 / 200, the event type
//	DELETE /v1/event-types/:type                      → 204
//	GET    /v1/event-types                            ?cursor=&limit= → 200 a page of event types
//	POST   /v1/tenants/:tenant/endpoints              {"url","event_types","description","ordering","on_dead"} → 201 the endpoint plus "secret", Location
//	GET    /v1/tenants/:tenant/endpoints              ?cursor=&limit= → 200 a page of endpoints
//	GET    /v1/tenants/:tenant/endpoints/:id          → 200 the endpoint
//	PATCH  /v1/tenants/:tenant/endpoints/:id          {"url","event_types","description","ordering","on_dead","disabled","deliver_held"}, each optional → 200 the endpoint
//	DELETE /v1/tenants/:tenant/endpoints/:id          → 204
//	POST   /v1/tenants/:tenant/endpoints/:id/secret/rotate  {"grace"} (body optional; "24h" default, "0s" to 168h) → 200 the endpoint plus the new "secret"
//	POST   /v1/tenants/:tenant/endpoints/:id/secret/revoke  → 200 the endpoint plus a new "secret"; every old key stops at once
//	POST   /v1/tenants/:tenant/endpoints/:id/secret/reveal  (body optional) → 200 {"secret","previous":[{"secret","expires"}],"environment"}, recorded in the endpoint's "secret_reveals"
//	POST   /v1/tenants/:tenant/endpoints/:id/verify   → 200 {"verified","reason","endpoint"}: sends the webhook-challenge now
//	POST   /v1/tenants/:tenant/events                 {"type","data","api_version"} + optional Idempotency-Key → 202 {"id","created","deliveries"}
//	GET    /v1/tenants/:tenant/events/:id             → 200 {"event": stored envelope, "deliveries": [delivery...]}
//	GET    /v1/tenants/:tenant/deliveries/:id         → 200 the delivery
//	POST   /v1/tenants/:tenant/deliveries/:id/replay  → 202 the delivery, replayed by "admin" or "token tok_…"
//	POST   /v1/tenants/:tenant/deliveries/:id/skip    → 200 the delivery, its line going on without it; 409 not_blocking unless it is a dead head blocking its line
//	GET    /v1/tenants/:tenant/dead-letters           ?cursor=&limit= → 200 a page of dead deliveries
//	POST   /v1/tenants/:tenant/dead-letters/replay    {"since","until","endpoint"} → 202 {"task"}, Location; 409 limit_reached at the tenant's bound of running tasks
//	POST   /v1/tenants/:tenant/endpoints/:id/backfill {"since","until"} → 202 {"task"}, Location; 409 limit_reached likewise
//	GET    /v1/tenants/:tenant/deliveries             ?state=&type=&endpoint=&since=&until=&limit=&cursor= → 200 newest first
//	GET    /v1/tenants/:tenant/events                 ?cursor=&type=&since=&limit= → 200 the reconciliation feed, log order
//	GET    /v1/tenants/:tenant/report                 ?last=1000 → 200 the delivery report
//	GET    /v1/tenants/:tenant/tasks                  ?cursor=&limit= → 200 a page of the tenant's tasks, newest first
//	GET    /v1/tenants/:tenant/tasks/:id              → 200 the task; 404 task_not_found for one not the tenant's
//	POST   /v1/tenants/:tenant/access-tokens          {"ttl"} (admin) → 201 the token, shown once
//	GET    /v1/tenants/:tenant/access-tokens          ?cursor=&limit= (admin) → 200 a page of tokens, without their values
//	DELETE /v1/tenants/:tenant/access-tokens/:id      (admin) → 204
//	GET    /v1/admin/report                           ?last=1000 (admin) → 200 {"tenants": [...], "total"}
//	GET    /v1/admin/backup                           (admin) → 200 a consistent copy of the database file
//	GET    /v1/tasks                                  ?cursor=&limit= (admin) → 200 a page of every task, the operator's included
//	GET    /v1/tasks/:id                              (admin) → 200 any task
//	GET    /readyz, /metrics                          no token
//	GET    /v1/openapi.json                           no token → 200 the OpenAPI 3.1 document
//	GET    /console/...                               the web console (console.go)
//
// A tenant access token (whk_t_…) may use its own tenant's routes above,
// except ingest, PUT and DELETE of the tenant and access tokens; every other route,
// and every route of another tenant (existing or not), answers the same
// 403 forbidden (see security.go).
//
// The endpoint create, secret rotate, secret revoke and secret reveal
// responses are the only ones that ever show a signing secret
// ("whsec_..."), with the tenant's "environment"; they are sent with
// Cache-Control: no-store. A reveal is recorded on the endpoint
// ("secret_reveals": who and when, the latest 20) and in the log (without
// the secret). An event's
// "event" member is the envelope exactly as stored, the bytes every attempt
// signs. An ingest repeated with the same Idempotency-Key and the same body
// answers 202 with the first event's id and deliveries and the header
// Idempotent-Replayed: true; the same key with another body is a 409.
// Every listing answers {"data": [...], "next_cursor", "has_more"} ("data"
// is [] when empty) and takes ?limit= (1 to 1000; 100) and ?cursor= (a
// page's next_cursor). "next_cursor" is null on the last page, except in
// the reconciliation feed, where it always says where to resume. A query
// parameter a /v1 route does not take is 400 unknown_parameter.
//
// # Request bodies
//
// A body must be one JSON object, sent with Content-Type application/json,
// with no unknown fields and nothing after it, and at most Options.MaxBody
// bytes (256 KiB by default). An empty body needs no Content-Type; it is
// allowed where the route says the body is optional and is invalid_json
// elsewhere. A decoding error names what is wrong: the byte offset of a
// syntax error, or in "field" the JSON field of the wrong type or the
// unknown field.
//
// # Errors
//
// An error is answered with Content-Type application/problem+json and the
// body
//
//	{"type": "urn:webhookd:problem:<code>", "title": "...", "status": <int>,
//	 "code": "<code>", "detail": "...", "field": "<field at fault, omitted when none>"}
//
// The code is the stable engine.Code; clients match on it, not on the
// detail. The only table from code to status is this one:
//
//	invalid_json            400  the body is not one JSON object, or is missing
//	invalid_field           422  a field, header or query parameter has a bad value; "field" names it
//	unknown_parameter       400  a query parameter the route does not take; "field" names it
//	unknown_event_type      422  an event type not in the catalogue
//	body_too_large          413  the body is over the limit
//	unsupported_media_type  415  a body not sent as application/json
//	unauthorized            401  missing or wrong bearer token (with WWW-Authenticate: Bearer)
//	forbidden               403  a valid token not allowed this resource: a test token on live data
//	not_found               404  no such route
//	method_not_allowed      405  the route exists, the method does not (with an Allow header)
//	tenant_not_found        404
//	endpoint_not_found      404
//	event_not_found         404
//	delivery_not_found      404
//	idempotency_conflict    409  an Idempotency-Key reused with another body
//	unavailable             503  storage cannot take writes now (with Retry-After: 1)
//	overloaded              503  too many deliveries not yet delivered or dead, over [ingest] max_pending (with Retry-After: 5)
//	rate_limited            429  the token is over its ingest rate, Options.IngestRate, or an endpoint over its test events (with Retry-After in seconds)
//	internal                500  anything else
//
// An error that carries no code, and a recovered panic, is answered 500
// with the detail "internal error" and nothing more; the cause is logged at
// error level to Options.Logger for the operator. Tokens, secrets and
// request bodies are never logged.
package httpapi
