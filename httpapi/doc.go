// Package httpapi serves the webhookd API over HTTP: JSON in, JSON out, and
// every error as an RFC 9457 problem. It turns requests into calls on an
// *engine.Service and engine errors into statuses; it holds no state of its
// own and never imports storage.
//
// # Routes
//
// GET /healthz answers 200 {"status":"ok"} and needs no token. Every /v1
// route needs "Authorization: Bearer <token>" with one of Options.Tokens.
//
//	PUT    /v1/tenants/:tenant                        {"name"} (body optional) → 201 created / 200 updated, the tenant
//	GET    /v1/tenants/:tenant                        → 200 the tenant
//	PUT    /v1/event-types/:type                      {"description"} (body optional) → 201 / 200, the event type
//	GET    /v1/event-types                            → 200 {"data": [event type...]}
//	POST   /v1/tenants/:tenant/endpoints              {"url","event_types","description"} → 201 the endpoint plus "secret", Location
//	GET    /v1/tenants/:tenant/endpoints              → 200 {"data": [endpoint...]}
//	GET    /v1/tenants/:tenant/endpoints/:id          → 200 the endpoint
//	PATCH  /v1/tenants/:tenant/endpoints/:id          {"url","event_types","description","disabled"}, each optional → 200 the endpoint
//	DELETE /v1/tenants/:tenant/endpoints/:id          → 204
//	POST   /v1/tenants/:tenant/events                 {"type","data","api_version"} + optional Idempotency-Key → 202 {"id","created","deliveries"}
//	GET    /v1/tenants/:tenant/events/:id             → 200 {"event": stored envelope, "deliveries": [delivery...]}
//	GET    /v1/tenants/:tenant/deliveries/:id         → 200 the delivery
//	POST   /v1/tenants/:tenant/deliveries/:id/replay  → 202 the delivery, replayed by "admin"
//	GET    /v1/tenants/:tenant/dead-letters           ?cursor=&limit=1..1000 → 200 {"data": [delivery...], "next_cursor"}
//
// The endpoint create response is the only one that ever shows a signing
// secret ("whsec_..."); it is sent with Cache-Control: no-store. An event's
// "event" member is the envelope exactly as stored, the bytes every attempt
// signs. An ingest repeated with the same Idempotency-Key and the same body
// answers 202 with the first event's id and deliveries and the header
// Idempotent-Replayed: true; the same key with another body is a 409.
// Listings answer {"data": []} when empty; "next_cursor" is omitted on the
// last page.
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
//	unknown_event_type      422  an event type not in the catalogue
//	body_too_large          413  the body is over the limit
//	unsupported_media_type  415  a body not sent as application/json
//	unauthorized            401  missing or wrong bearer token (with WWW-Authenticate: Bearer)
//	forbidden               403  a valid token not allowed this resource
//	not_found               404  no such route
//	method_not_allowed      405  the route exists, the method does not (with an Allow header)
//	tenant_not_found        404
//	endpoint_not_found      404
//	event_not_found         404
//	delivery_not_found      404
//	idempotency_conflict    409  an Idempotency-Key reused with another body
//	unavailable             503  storage cannot take writes now (with Retry-After: 1)
//	internal                500  anything else
//
// An error that carries no code, and a recovered panic, is answered 500
// with the detail "internal error" and nothing more; the cause is logged at
// error level to Options.Logger for the operator. Tokens, secrets and
// request bodies are never logged.
package httpapi
