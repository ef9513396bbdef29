"""The Client: one method per operation of webhookd's API."""

import datetime
import http.client
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import (Any, BinaryIO, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union,
                    cast)

from .errors import MAX_PROBLEM_BODY, Problem, TransportError, WebhookdError
from .models import (AccessToken, CreatedEndpoint, CreatedOperationalEndpoint,
                     Delivery, DeliveryState, Endpoint, EndpointInput, EndpointPatch,
                     EventAnswer, EventType, EventTypeInput, FeedEntry, Health, IngestAnswer,
                     IngestInput, IssuedToken, OperationalEndpoint, OperationalEndpointInput,
                     OperationalEndpointPatch, OperationalSecretAnswer, PortalLink, Ready,
                     Report, RetryPolicy, RevealAnswer, SecretAnswer, Task, Tenant, TenantInput,
                     TenantsReport, TestEventAnswer, Verification)

__all__ = [
    "Client", "EventDetail", "Feed", "FeedEvent", "IngestResult", "format_time", "parse_time",
    "DEFAULT_MAX_ATTEMPTS", "DEFAULT_MAX_RETRY_WAIT", "DEFAULT_TIMEOUT", "DEFAULT_USER_AGENT",
]

DEFAULT_MAX_ATTEMPTS = 3
"""Attempts of a request that may be retried, the first included."""
DEFAULT_MAX_RETRY_WAIT = 30.0
"""The longest wait, in seconds, the client makes before a retry."""
DEFAULT_TIMEOUT = 60.0
"""Seconds an attempt may wait for the server (each read of a backup too)."""
DEFAULT_USER_AGENT = "webhookd-python-client"

Time = Union[datetime.datetime, str]
"""A time: an aware datetime, or an RFC 3339 string sent as it is."""
Duration = Union[datetime.timedelta, int, float]
"""A duration: a timedelta, or seconds."""

Query = Dict[str, str]


class IngestResult(IngestAnswer):
    """The answer of Client.ingest, with two members of the client's own."""
    # The Idempotency-Key the event was sent with: the caller's, or the
    # one ingest generated.
    idempotency_key: str
    # The server had stored this key already and answered with that event
    # rather than storing a new one (its Idempotent-Replayed header).
    replayed: bool


class EventDetail(EventAnswer):
    """The answer of Client.get_event, with a member of the client's own."""
    # The event's envelope exactly as its endpoints receive it: the bytes
    # webhookd signs, for a byte-wise comparison with what a receiver got
    # or a signature computed again. event is the same, decoded.
    raw_event: bytes


class FeedEvent(FeedEntry):
    """An event of the reconciliation feed (Feed), with its raw_event as
    EventDetail has it."""
    raw_event: bytes


_decoder = json.JSONDecoder()


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\n\r":
        i += 1
    return i


def _members(text: str, i: int) -> Dict[str, Tuple[int, int]]:
    """The span in text of each member's value of the JSON object that
    starts at text[i] (after white space), by name; the values are
    delimited by the standard library's decoder. ValueError when there is
    no object there."""
    spans: Dict[str, Tuple[int, int]] = {}
    i = _skip_space(text, i)
    if text[i:i + 1] != "{":
        raise ValueError("not a JSON object")
    i = _skip_space(text, i + 1)
    if text[i:i + 1] == "}":
        return spans
    while True:
        name, i = _decoder.raw_decode(text, i)
        i = _skip_space(text, i)
        if not isinstance(name, str) or text[i:i + 1] != ":":
            raise ValueError("not a JSON object")
        start = _skip_space(text, i + 1)
        _, end = _decoder.raw_decode(text, start)
        spans[name] = (start, end)
        i = _skip_space(text, end)
        if text[i:i + 1] == "}":
            return spans
        if text[i:i + 1] != ",":
            raise ValueError("not a JSON object")
        i = _skip_space(text, i + 1)


def _elements(text: str, i: int) -> List[int]:
    """Where each element of the JSON array that starts at text[i] (after
    white space) starts. ValueError when there is no array there."""
    starts: List[int] = []
    i = _skip_space(text, i)
    if text[i:i + 1] != "[":
        raise ValueError("not a JSON array")
    i = _skip_space(text, i + 1)
    if text[i:i + 1] == "]":
        return starts
    while True:
        starts.append(i)
        _, end = _decoder.raw_decode(text, i)
        i = _skip_space(text, end)
        if text[i:i + 1] == "]":
            return starts
        if text[i:i + 1] != ",":
            raise ValueError("not a JSON array")
        i = _skip_space(text, i + 1)


def _raw_event(path: str, text: str, obj: int) -> bytes:
    """The bytes of the member "event" of the JSON object at text[obj]:
    the envelope as webhookd stored and sends it."""
    try:
        start, end = _members(text, obj)["event"]
    except (KeyError, ValueError) as e:
        raise WebhookdError(f"webhookd: GET {path}: the answer has no event envelope") from e
    return text[start:end].encode("utf-8")


class _Answer:
    """An answer in 2xx, read whole."""

    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers  # by lower-case name
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """A client of one webhookd server. Every method sends its request at
    once, but the listings, which are generators: they send nothing until
    iterated. Stateless, so safe to share between threads.

    base_url is the server's root ("http://127.0.0.1:8080", or with a path
    prefix when the API is served below one); token the bearer token sent
    with every request: an admin or test token of the server's
    configuration, or a tenant access token (issue_access_token). Without
    one only health and ready work.

    Retries: an answer 429 or 503 is retried after the wait its
    Retry-After asks for (1 s, doubling, when it names none), up to
    max_attempts attempts in all (1: no retries) and only when the wait is
    at most max_retry_wait seconds, and only for requests that are safe to
    repeat: every GET but ready; every PUT and DELETE (the put_ and
    delete_ methods, revoke_access_token), idempotent by HTTP's definition
    (RFC 9110 §9.2.2); and ingest, which always sends an Idempotency-Key
    (one is generated when none is given, and the same key is sent on
    every attempt), so a retried ingest stores one event. A repeat leaves
    the server as one request would, but its answer may differ when the
    first attempt took effect and only its answer was lost: a put then
    reports an update (created False), and a delete may raise not found.
    Other requests are sent once: a POST that creates or acts
    (create_endpoint, issue_access_token, create_portal_link,
    send_test_event, rotate_secret, replay_delivery, ...) could be done
    twice if it committed before the 503, and a PATCH (the update_
    methods) is not idempotent by definition. Their 429 or 503 is raised
    as a Problem with its retry_after, for the caller to decide.

    timeout bounds each attempt, in seconds (None: no bound). sleep is
    what waits between attempts (time.sleep).
    """

    def __init__(self, base_url: str, token: Optional[str] = None, *,
                 timeout: Optional[float] = DEFAULT_TIMEOUT,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
                 user_agent: str = DEFAULT_USER_AGENT,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"webhookd: base URL {base_url!r}: want http:// or https:// and a host")
        if u.query or u.fragment:
            raise ValueError(f"webhookd: base URL {base_url!r}: want no query or fragment")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.timeout = timeout
        self.max_attempts = max(max_attempts, 1)
        self.max_retry_wait = max_retry_wait
        self.user_agent = user_agent
        self._sleep = sleep
        self._opener = urllib.request.build_opener()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"  # never the token

    # The transport.

    def _open(self, method: str, path: str, query: Optional[Query] = None,
              body: Optional[bytes] = None, headers: Optional[Mapping[str, str]] = None,
              retry: bool = False) -> http.client.HTTPResponse:
        """Send the request and return the open response to its last
        attempt, whose status is 2xx; raise a Problem for an answer outside
        2xx, a TransportError when there is none. The caller closes it.

        A 429 or 503 is retried (see the class doc) when retry is set (a
        GET, an ingest with its Idempotency-Key) or the method is PUT or
        DELETE: idempotent (RFC 9110 §9.2.2), so a repeat leaves the
        server as one request would, also when the first attempt took
        effect."""
        retry = retry or method in ("PUT", "DELETE")
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        h = {
            "Accept": "application/json, application/problem+json",
            "User-Agent": self.user_agent,
        }
        if body is not None:
            h["Content-Type"] = "application/json"
        if self._token:
            h["Authorization"] = "Bearer " + self._token
        if headers:
            h.update(headers)
        req = urllib.request.Request(url, data=body, headers=h, method=method)
        backoff = 1.0
        attempt = 1
        while True:
            try:
                return cast(http.client.HTTPResponse, self._opener.open(req, timeout=self.timeout))
            except urllib.error.HTTPError as e:
                try:
                    raw = e.read(MAX_PROBLEM_BODY)
                finally:
                    e.close()
                p = Problem.from_answer(e.code, str(e.reason or ""),
                                        {k.lower(): v for k, v in e.headers.items()}, raw)
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                reason = getattr(e, "reason", None) or e
                raise TransportError(f"webhookd: {method} {path}: {reason}") from e
            if not retry or p.status not in (429, 503) or attempt >= self.max_attempts:
                raise p
            wait = p.retry_after or 0.0
            if wait <= 0:
                wait, backoff = backoff, backoff * 2
            if wait > self.max_retry_wait:
                raise p
            self._sleep(wait)
            attempt += 1

    def _do(self, method: str, path: str, query: Optional[Query] = None, body: Any = None,
            headers: Optional[Mapping[str, str]] = None, retry: bool = False) -> _Answer:
        data = body if body is None or isinstance(body, bytes) else _encode(body)
        with self._open(method, path, query, data, headers, retry) as resp:
            try:
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"webhookd: {method} {path}: reading the answer: {e}") from e
            return _Answer(resp.status, {k.lower(): v for k, v in resp.headers.items()}, raw)

    def _get(self, path: str, query: Optional[Query] = None) -> Any:
        return self._do("GET", path, query, retry=True).json()

    def _list(self, path: str, query: Query, limit: Optional[int],
              cursor: Optional[str]) -> Iterator[Any]:
        """Walk the listing at path: one page at a time, following
        next_cursor while has_more is true."""
        if limit is not None:
            query["limit"] = str(limit)
        while True:
            q = dict(query)
            if cursor:
                q["cursor"] = cursor
            page = self._get(path, q)
            yield from page["data"]
            if not page["has_more"]:
                return
            nxt = page.get("next_cursor")
            if not nxt or nxt == cursor:
                raise WebhookdError(f"webhookd: GET {path}: the server answered has_more "
                                    "without a new next_cursor")
            cursor = nxt

    # Health.

    def health(self) -> Health:
        """Return /healthz's answer: the server is up."""
        return cast(Health, self._get("/healthz"))

    def ready(self) -> Ready:
        """Return /readyz's answer when the server can take work; else raise
        a Problem (503 unavailable) whose detail says why. Asked once, never
        retried: a readiness check wants the answer of now."""
        return cast(Ready, self._do("GET", "/readyz").json())

    # Tenants.

    def list_tenants(self, *, limit: Optional[int] = None,
                     cursor: Optional[str] = None) -> Iterator[Tenant]:
        """Walk every tenant, in id order. Admin tokens only."""
        return self._list("/v1/tenants", {}, limit, cursor)

    def put_tenant(self, id: str, tenant: Optional[TenantInput] = None) -> Tuple[Tenant, bool]:
        """Create tenant id or update it; return it and whether it was
        created. Admin tokens only (a test token may create test tenants)."""
        a = self._do("PUT", _tenant(id), body=tenant or {})
        return cast(Tenant, a.json()), a.status == 201

    def get_tenant(self, id: str) -> Tenant:
        """Return tenant id."""
        return cast(Tenant, self._get(_tenant(id)))

    def delete_tenant(self, id: str, *, force: bool = False) -> Task:
        """Delete tenant id and everything of it: the tenant, its endpoints
        and tokens at once, the rest by the task returned (kind
        tenant.purge, the operator's: wait_task follows it). A tenant with
        deliveries pending is refused (pending_deliveries) unless force is
        set, which drops them."""
        a = self._do("DELETE", _tenant(id), {"force": "true"} if force else None)
        return cast(Task, a.json()["task"])

    # The catalogue and the retry policies.

    def list_event_types(self, *, limit: Optional[int] = None,
                         cursor: Optional[str] = None) -> Iterator[EventType]:
        """Walk the catalogue of event types, in name order."""
        return self._list("/v1/event-types", {}, limit, cursor)

    def put_event_type(self, name: str,
                       event_type: Optional[EventTypeInput] = None) -> Tuple[EventType, bool]:
        """Add name to the catalogue, or replace its description, status,
        schema and example (a put without one of them resets it: no example,
        no schema, active); return it and whether it was added. A schema
        that does not compile is a Problem invalid_field naming "schema"."""
        a = self._do("PUT", "/v1/event-types/" + _seg(name), body=event_type or {})
        return cast(EventType, a.json()), a.status == 201

    def delete_event_type(self, name: str) -> None:
        """Take name out of the catalogue: ingest of that type is refused
        from then on; events stored already are delivered as usual."""
        self._do("DELETE", "/v1/event-types/" + _seg(name))

    def list_retry_policies(self, *, limit: Optional[int] = None,
                            cursor: Optional[str] = None) -> Iterator[RetryPolicy]:
        """Walk the server's retry policies, in name order: what a tenant's
        or an endpoint's retry_policy may name."""
        return self._list("/v1/retry-policies", {}, limit, cursor)

    # Endpoints.

    def create_endpoint(self, tenant: str, endpoint: EndpointInput) -> CreatedEndpoint:
        """Add an endpoint to tenant; return it with its signing secret,
        which no read shows again (reveal_secret does, recorded)."""
        return cast(CreatedEndpoint, self._do("POST", _tenant(tenant, "endpoints"),
                                              body=endpoint).json())

    def list_endpoints(self, tenant: str, *, limit: Optional[int] = None,
                       cursor: Optional[str] = None) -> Iterator[Endpoint]:
        """Walk tenant's endpoints, in id order."""
        return self._list(_tenant(tenant, "endpoints"), {}, limit, cursor)

    def get_endpoint(self, tenant: str, id: str) -> Endpoint:
        """Return endpoint id of tenant."""
        return cast(Endpoint, self._get(_tenant(tenant, "endpoints", _seg(id))))

    def update_endpoint(self, tenant: str, id: str, patch: EndpointPatch) -> Endpoint:
        """Change the members of endpoint id that patch has; return it."""
        return cast(Endpoint, self._do("PATCH", _tenant(tenant, "endpoints", _seg(id)),
                                       body=patch).json())

    def delete_endpoint(self, tenant: str, id: str) -> None:
        """Delete endpoint id of tenant; its pending deliveries are not
        attempted again."""
        self._do("DELETE", _tenant(tenant, "endpoints", _seg(id)))

    def rotate_secret(self, tenant: str, id: str,
                      grace: Optional[Duration] = None, *,
                      secret: Optional[str] = None) -> SecretAnswer:
        """Give endpoint id a new secret. The previous one keeps signing
        beside it for grace, so the receiver can switch keys without
        dropping a webhook (each request carries a signature per key); a
        grace of 0 drops it at once (for a leaked key); None: the server's
        default, 24 hours. secret, optional, is the new secret, one of
        your own (as EndpointInput's secret takes it: moving from another
        service); None: the server makes one."""
        body: Dict[str, Any] = {}
        if grace is not None:
            body["grace"] = _go_duration(grace)
        if secret is not None:
            body["secret"] = secret
        return cast(SecretAnswer, self._do("POST", _endpoint_path(tenant, id, "secret", "rotate"),
                                           body=body).json())

    def revoke_secret(self, tenant: str, id: str) -> SecretAnswer:
        """Replace every secret of endpoint id at once: the old ones sign
        nothing more."""
        return cast(SecretAnswer, self._do("POST", _endpoint_path(tenant, id, "secret", "revoke"),
                                           body={}).json())

    def reveal_secret(self, tenant: str, id: str) -> RevealAnswer:
        """Show the secrets endpoint id signs with now (the current one and
        those in a rotation's grace window) and its custom headers in plain.
        The server records who asked and when. Keep the answer out of
        logs."""
        return cast(RevealAnswer, self._do("POST", _endpoint_path(tenant, id, "secret", "reveal"),
                                           body={}).json())

    def verify_endpoint(self, tenant: str, id: str) -> Verification:
        """Send the Standard Webhooks verification challenge to endpoint id
        now. A challenge that fails is not an error: the answer says
        verified false and why."""
        return cast(Verification, self._do("POST", _endpoint_path(tenant, id, "verify"),
                                           body={}).json())

    def send_test_event(self, tenant: str, id: str, type: Optional[str] = None) -> TestEventAnswer:
        """Send endpoint id a test event of type (None: the first by name
        with an example, else the first), whose data is the type's example:
        signed and delivered as any event, to that endpoint only."""
        body = {"type": type} if type else {}
        return cast(TestEventAnswer, self._do("POST", _endpoint_path(tenant, id, "test-events"),
                                              body=body).json())

    def backfill_endpoint(self, tenant: str, id: str, since: Time,
                          until: Optional[Time] = None) -> Task:
        """Start delivering to endpoint id every retained event created in
        [since, until) (until None: now) that it receives and has no
        delivery of yet, each in a new cycle; return the task, running
        (wait_task follows it: its done counts the deliveries made, its
        skipped the events that had one, so a second backfill makes none
        twice). A tenant at its bound of running tasks is refused
        (limit_reached)."""
        body = {"since": format_time(since)}
        if until is not None:
            body["until"] = format_time(until)
        a = self._do("POST", _endpoint_path(tenant, id, "backfill"), body=body)
        return cast(Task, a.json()["task"])

    # Events.

    def ingest(self, tenant: str, event: Union[IngestInput, bytes], *,
               idempotency_key: Optional[str] = None) -> IngestResult:
        """Store an event for tenant and schedule its delivery to every
        endpoint subscribed to its type.

        event is an IngestInput, or bytes of one already encoded, sent as
        they are (for data whose exact bytes matter). It is sent with
        idempotency_key, or a random key when that is None, and the same
        key on every retry, so a retried ingest stores one event; the
        result says which key, and whether the server had it already.
        """
        key = idempotency_key or "wc_" + secrets.token_hex(16)
        a = self._do("POST", _tenant(tenant, "events"), body=event,
                     headers={"Idempotency-Key": key}, retry=True)
        res = cast(IngestResult, a.json())
        res["idempotency_key"] = key
        res["replayed"] = a.headers.get("idempotent-replayed") == "true"
        return res

    def feed(self, tenant: str, *, cursor: Optional[str] = None, type: Optional[str] = None,
             since: Optional[Time] = None, limit: Optional[int] = None,
             channel: Optional[str] = None) -> "Feed":
        """Return a walk of tenant's reconciliation feed (its events in
        ingest order) from cursor (None: the first event). It sends nothing
        until iterated."""
        q: Query = {}
        _set(q, "type", type)
        _set(q, "since", None if since is None else format_time(since))
        _set(q, "limit", None if limit is None else str(limit))
        _set(q, "channel", channel)
        return Feed(self, _tenant(tenant, "events"), q, cursor)

    def get_event(self, tenant: str, id: str) -> EventDetail:
        """Return event id of tenant: its envelope (event, and raw_event
        exactly as delivered) and its deliveries."""
        path = _tenant(tenant, "events", _seg(id))
        text = self._do("GET", path, retry=True).body.decode("utf-8")
        detail = cast(EventDetail, json.loads(text))
        detail["raw_event"] = _raw_event(path, text, 0)
        return detail

    # Deliveries.

    def list_deliveries(self, tenant: str, *, state: Optional[DeliveryState] = None,
                        type: Optional[str] = None, endpoint: Optional[str] = None,
                        status: Optional[str] = None, since: Optional[Time] = None,
                        until: Optional[Time] = None, channel: Optional[str] = None,
                        limit: Optional[int] = None,
                        cursor: Optional[str] = None) -> Iterator[Delivery]:
        """Walk tenant's delivery log, newest first, keeping the deliveries
        the filters select: state, event type, endpoint id, status (the
        class of the last attempt's status: "2xx" … "5xx", or "none"),
        created in [since, until), on channel."""
        q: Query = {}
        _set(q, "state", state)
        _set(q, "type", type)
        _set(q, "endpoint", endpoint)
        _set(q, "status", status)
        _set(q, "since", None if since is None else format_time(since))
        _set(q, "until", None if until is None else format_time(until))
        _set(q, "channel", channel)
        return self._list(_tenant(tenant, "deliveries"), q, limit, cursor)

    def get_delivery(self, tenant: str, id: str) -> Delivery:
        """Return delivery id of tenant with its attempts and replays."""
        return cast(Delivery, self._get(_tenant(tenant, "deliveries", _seg(id))))

    def replay_delivery(self, tenant: str, id: str) -> Delivery:
        """Send delivery id again, in a new cycle, whatever its state;
        return it as queued. A delivery whose endpoint was deleted has
        nowhere to go: Problem endpoint_not_found (field endpoint_id), and
        nothing changes."""
        return cast(Delivery, self._do("POST", _tenant(tenant, "deliveries", _seg(id),
                                                       "replay")).json())

    def skip_delivery(self, tenant: str, id: str) -> Delivery:
        """Let the line of delivery id go on without it: it must be a dead
        delivery blocking its line (its endpoint's on_dead is block), else
        the Problem's code is not_blocking."""
        return cast(Delivery, self._do("POST", _tenant(tenant, "deliveries", _seg(id),
                                                       "skip")).json())

    def list_dead_letters(self, tenant: str, *, limit: Optional[int] = None,
                          cursor: Optional[str] = None) -> Iterator[Delivery]:
        """Walk tenant's dead letters: its deliveries in state dead."""
        return self._list(_tenant(tenant, "dead-letters"), {}, limit, cursor)

    def replay_dead_letters(self, tenant: str, since: Time, until: Optional[Time] = None,
                            endpoint: Optional[str] = None) -> Task:
        """Start sending again every dead letter of tenant that died in
        [since, until) (until None: now), of endpoint or of all; return the
        task, running (wait_task follows it: its done counts the dead
        letters replayed). A tenant at its bound of running tasks is
        refused (limit_reached)."""
        body = {"since": format_time(since)}
        if until is not None:
            body["until"] = format_time(until)
        if endpoint is not None:
            body["endpoint"] = endpoint
        a = self._do("POST", _tenant(tenant, "dead-letters", "replay"), body=body)
        return cast(Task, a.json()["task"])

    # Background tasks.

    def list_tenant_tasks(self, tenant: str, *, limit: Optional[int] = None,
                          cursor: Optional[str] = None) -> Iterator[Task]:
        """Walk tenant's tasks (its range replays and backfills), newest
        first."""
        return self._list(_tenant(tenant, "tasks"), {}, limit, cursor)

    def get_tenant_task(self, tenant: str, id: str) -> Task:
        """Return task id of tenant (task_not_found for one not the
        tenant's)."""
        return cast(Task, self._get(_tenant(tenant, "tasks", _seg(id))))

    def list_tasks(self, *, limit: Optional[int] = None,
                   cursor: Optional[str] = None) -> Iterator[Task]:
        """Walk every task, the operator's included (a tenant's purge),
        newest first. Admin tokens only."""
        return self._list("/v1/tasks", {}, limit, cursor)

    def get_task(self, id: str) -> Task:
        """Return any task, the operator's included. Admin tokens only."""
        return cast(Task, self._get("/v1/tasks/" + _seg(id)))

    def wait_task(self, task: Task, *, poll: float = 0.5,
                  timeout: Optional[float] = None) -> Task:
        """Read task every poll seconds until it has ended (state
        succeeded or failed, which the caller checks: error says why it
        failed) and return it as it ended. A tenant's task is read through
        its tenant's route, so its tenant's token may wait for it; the
        operator's through the admin's. With timeout, raise TimeoutError
        once that many seconds passed with the task still running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while task["state"] == "running":
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"webhookd: task {task['id']} still runs after {timeout} s")
            self._sleep(poll)
            tenant = task.get("tenant")
            task = self.get_tenant_task(tenant, task["id"]) if tenant else self.get_task(task["id"])
        return task

    # Reports.

    def report(self, tenant: str, last: Optional[int] = None) -> Report:
        """Return the delivery report over tenant's last events (None: the
        server's default, 1000)."""
        return cast(Report, self._get(_tenant(tenant, "report"), _last(last)))

    def report_all(self, last: Optional[int] = None) -> TenantsReport:
        """Return the report of every tenant and their total. Admin tokens
        only."""
        return cast(TenantsReport, self._get("/v1/admin/report", _last(last)))

    # Access tokens and the portal.

    def issue_access_token(self, tenant: str, ttl: Optional[Duration] = None) -> IssuedToken:
        """Make a token that acts on tenant's routes only, for ttl (None:
        the server's default, 24 hours; at most 30 days). The token is shown
        this once. Admin tokens only."""
        body = {} if ttl is None else {"ttl": _go_duration(ttl)}
        return cast(IssuedToken, self._do("POST", _tenant(tenant, "access-tokens"),
                                          body=body).json())

    def list_access_tokens(self, tenant: str, *, limit: Optional[int] = None,
                           cursor: Optional[str] = None) -> Iterator[AccessToken]:
        """Walk tenant's access tokens (revoked and expired ones included
        until the server prunes them). Admin tokens only."""
        return self._list(_tenant(tenant, "access-tokens"), {}, limit, cursor)

    def revoke_access_token(self, tenant: str, id: str) -> None:
        """Revoke token id (tok_…) of tenant: refused from the next request
        on. Admin tokens only."""
        self._do("DELETE", _tenant(tenant, "access-tokens", _seg(id)))

    def create_portal_link(self, tenant: str, ttl: Optional[Duration] = None,
                           return_url: Optional[str] = None) -> PortalLink:
        """Make a one-time URL that opens the console as tenant, within ttl
        (None: the server's default, 10 minutes); return_url is where the
        console's "back" link goes. Hand it to your customer's browser right
        away. Admin tokens only."""
        body: Dict[str, str] = {}
        if ttl is not None:
            body["ttl"] = _go_duration(ttl)
        if return_url is not None:
            body["return_url"] = return_url
        return cast(PortalLink, self._do("POST", _tenant(tenant, "portal-links"),
                                         body=body).json())

    # Operations.

    # Operational endpoints: the operator's own, which receive webhookd's
    # operational events (admin tokens of the live environment only).

    def create_operational_endpoint(
            self, endpoint: OperationalEndpointInput) -> CreatedOperationalEndpoint:
        """Make an operational endpoint; return it with its signing secret,
        which no read shows again."""
        return cast(CreatedOperationalEndpoint,
                    self._do("POST", "/v1/operational-endpoints", body=endpoint).json())

    def list_operational_endpoints(self, *, limit: Optional[int] = None,
                                   cursor: Optional[str] = None) -> Iterator[OperationalEndpoint]:
        """Walk the operational endpoints, in creation order, the [alerts]
        one (source "config") among them."""
        return self._list("/v1/operational-endpoints", {}, limit, cursor)

    def get_operational_endpoint(self, id: str) -> OperationalEndpoint:
        """Return operational endpoint id."""
        return cast(OperationalEndpoint, self._get("/v1/operational-endpoints/" + _seg(id)))

    def update_operational_endpoint(self, id: str,
                                    patch: OperationalEndpointPatch) -> OperationalEndpoint:
        """Change the members of operational endpoint id that patch has;
        return it. The [alerts] endpoint's url is the config file's (409
        config_managed)."""
        return cast(OperationalEndpoint, self._do("PATCH", "/v1/operational-endpoints/" + _seg(id),
                                                  body=patch).json())

    def delete_operational_endpoint(self, id: str) -> None:
        """Delete operational endpoint id (not the [alerts] one: 409
        config_managed)."""
        self._do("DELETE", "/v1/operational-endpoints/" + _seg(id))

    def rotate_operational_secret(self, id: str,
                                  grace: Optional[Duration] = None, *,
                                  secret: Optional[str] = None) -> OperationalSecretAnswer:
        """Give operational endpoint id a new secret, as rotate_secret does
        an endpoint's."""
        body: Dict[str, Any] = {}
        if grace is not None:
            body["grace"] = _go_duration(grace)
        if secret is not None:
            body["secret"] = secret
        return cast(OperationalSecretAnswer,
                    self._do("POST", "/v1/operational-endpoints/" + _seg(id) + "/secret/rotate",
                             body=body).json())

    def backup(self, out: BinaryIO) -> int:
        """Stream a consistent copy of the server's database into out and
        return how many bytes were written. The copy is whole only when no
        error is raised: a transfer cut short raises TransportError, and
        what reached out must be thrown away. Admin tokens only."""
        path = "/v1/admin/backup"
        n = 0
        with self._open("GET", path, retry=True) as resp:
            want = resp.headers.get("Content-Length")
            try:
                while True:
                    chunk = resp.read(64 << 10)
                    if not chunk:
                        break
                    out.write(chunk)
                    n += len(chunk)
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"webhookd: GET {path}: after {n} bytes: {e}") from e
        if want is not None and want.isdigit() and int(want) != n:
            raise TransportError(f"webhookd: GET {path}: got {n} bytes of {want}")
        return n


class Feed:
    """A walk of a tenant's reconciliation feed: its events in ingest
    order, each envelope as delivered. Unlike the other listings it ends
    at the end of the log for now; cursor then says where to resume, in
    this Feed or a later one (Client.feed(cursor=...)), to read only what
    was ingested since. Iterating again continues from cursor.

    One walk at a time: not safe for concurrent use.
    """

    def __init__(self, client: Client, path: str, query: Query, cursor: Optional[str]) -> None:
        self._client = client
        self._path = path
        self._query = query
        self.cursor: Optional[str] = cursor
        """Where to resume: after the last event yielded, or as far as the
        server said the log was read; the cursor given before the first
        page."""

    def __iter__(self) -> Iterator[FeedEvent]:
        while True:
            q = dict(self._query)
            _set(q, "cursor", self.cursor)
            text = self._client._do("GET", self._path, q, retry=True).body.decode("utf-8")
            page = json.loads(text)
            try:
                data = _members(text, 0)["data"]
                starts = _elements(text, data[0])
            except (KeyError, ValueError) as e:
                raise WebhookdError(f"webhookd: GET {self._path}: the answer is no page") from e
            if len(starts) != len(page["data"]):
                raise WebhookdError(f"webhookd: GET {self._path}: the answer is no page")
            before = self.cursor
            for entry, at in zip(page["data"], starts):
                self.cursor = entry["cursor"]
                entry["raw_event"] = _raw_event(self._path, text, at)
                yield cast(FeedEvent, entry)
            if page.get("next_cursor"):
                self.cursor = page["next_cursor"]
            if not page["has_more"]:
                return
            if self.cursor == before:
                raise WebhookdError(f"webhookd: GET {self._path}: the server answered has_more "
                                    "without a new next_cursor")


def format_time(t: Time) -> str:
    """Return t as the API takes a time: a string is returned as it is, an
    aware datetime in UTC RFC 3339 with milliseconds. A naive datetime is
    refused (ValueError): which zone it means is unknown."""
    if isinstance(t, str):
        return t
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError("webhookd: a naive datetime: give it a tzinfo (datetime.timezone.utc)")
    u = t.astimezone(datetime.timezone.utc)
    return u.strftime("%Y-%m-%dT%H:%M:%S.") + f"{u.microsecond // 1000:03d}Z"


def parse_time(s: str) -> datetime.datetime:
    """Return an RFC 3339 time of an answer ("2026-12-02T14:35:10.123Z")
    as an aware datetime (fromisoformat before Python 3.11 takes no Z)."""
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    return datetime.datetime.fromisoformat(s)


def _encode(body: Any) -> bytes:
    """Return body as the compact UTF-8 JSON the API takes. NaN and the
    infinities are refused (ValueError): they are not JSON."""
    return json.dumps(body, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


def _go_duration(d: Duration) -> str:
    """Return d as a Go duration string, exact to the microsecond."""
    if not isinstance(d, datetime.timedelta):
        d = datetime.timedelta(seconds=d)
    if d < datetime.timedelta(0):
        raise ValueError("webhookd: a negative duration")
    return f"{d // datetime.timedelta(microseconds=1)}us"


def _seg(s: str) -> str:
    """Escape one path segment."""
    return urllib.parse.quote(s, safe="")


def _tenant(tenant: str, *more: str) -> str:
    return "/".join(["/v1/tenants", _seg(tenant), *more])


def _endpoint_path(tenant: str, id: str, *more: str) -> str:
    return _tenant(tenant, "endpoints", _seg(id), *more)


def _last(last: Optional[int]) -> Optional[Query]:
    return None if last is None else {"last": str(last)}


def _set(q: Query, name: str, v: Optional[str]) -> None:
    if v:
        q[name] = v

