"""The errors a Client raises."""

import email.utils
import json
import time
from typing import Any, Mapping, Optional

__all__ = ["WebhookdError", "Problem", "TransportError"]

# How much of an error answer is read, and of a body that is not
# problem+json, how much becomes the detail.
MAX_PROBLEM_BODY = 64 << 10
MAX_DETAIL_EXCERPT = 512


class WebhookdError(Exception):
    """The base of every error a Client raises itself."""


class Problem(WebhookdError):
    """An error answer of the API: RFC 9457 problem details with webhookd's
    stable code and the field at fault. Raised for every answer outside 2xx.

    Match on code (webhookd.models.ProblemCode lists them), never on
    detail, whose wording may change::

        try:
            client.ingest("acme", {"type": "nope", "data": {}})
        except webhookd.Problem as p:
            if p.code == "unknown_event_type": ...

    An error answer that is not problem+json (from a proxy in front of the
    server, say) is a Problem too, with code None, the HTTP reason as title
    and the start of the body as detail.
    """

    status: int
    """The HTTP status of the answer."""
    code: Optional[str]
    """The kind of problem (a ProblemCode); None when not problem+json."""
    title: str
    """A short summary of the code, the same for every problem with it."""
    detail: str
    """What went wrong with this request, for a person."""
    field: Optional[str]
    """The request field, query parameter or header at fault, if any."""
    type: str
    """The problem's URI: "urn:webhookd:problem:" + code."""
    retry_after: Optional[float]
    """The answer's Retry-After (429 and 503), in seconds; None without."""

    def __init__(self, status: int, code: Optional[str] = None, title: str = "",
                 detail: str = "", field: Optional[str] = None, type: str = "",
                 retry_after: Optional[float] = None) -> None:
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.field = field
        self.type = type
        self.retry_after = retry_after
        super().__init__(str(self))

    def __str__(self) -> str:
        s = f"webhookd: {self.status}"
        if self.code:
            s += f" {self.code}"
        if self.detail:
            s += f": {self.detail}"
        elif self.title:
            s += f": {self.title}"
        if self.field:
            s += f" (field {self.field})"
        return s

    def __repr__(self) -> str:
        return (f"Problem(status={self.status!r}, code={self.code!r}, "
                f"field={self.field!r}, detail={self.detail!r})")

    @classmethod
    def from_answer(cls, status: int, reason: str, headers: Mapping[str, str],
                    body: bytes, now: Optional[float] = None) -> "Problem":
        """Return the Problem of an error answer: its status, headers (by
        lower-case name) and the start of its body."""
        retry = parse_retry_after(headers.get("retry-after", ""), now)
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype == "application/problem+json":
            try:
                doc: Any = json.loads(body)
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                return cls(status, _str_or_none(doc.get("code")), _str(doc.get("title")),
                           _str(doc.get("detail")), _str_or_none(doc.get("field")),
                           _str(doc.get("type")), retry)
        excerpt = body[:MAX_DETAIL_EXCERPT].decode("utf-8", "replace").strip()
        return cls(status, None, reason, excerpt, None, "", retry)


class TransportError(WebhookdError):
    """The request got no answer: the connection failed or timed out. The
    cause (an OSError) is its __cause__."""


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _str_or_none(v: Any) -> Optional[str]:
    return v if isinstance(v, str) and v else None


def parse_retry_after(value: str, now: Optional[float] = None) -> Optional[float]:
    """Return a Retry-After header, in seconds or an HTTP date (RFC 9110
    10.2.3), as seconds to wait from now; None when it is empty or not
    valid."""
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(min(int(value), 1 << 31))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)
