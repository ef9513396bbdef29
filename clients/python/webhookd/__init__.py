"""A typed client for webhookd's HTTP API. Standard library only.

    import webhookd

    client = webhookd.Client("http://127.0.0.1:8080", token=os.environ["WEBHOOKD_TOKEN"])
    client.put_tenant("acme", {"name": "Acme"})
    res = client.ingest("acme", {"type": "invoice.paid", "data": {"id": "in_1"}})
    for d in client.list_deliveries("acme", state="dead"):
        print(d["id"], d.get("reason"))

Every method is named after the API's operation (operationId in snake
case); answers are the decoded JSON objects, typed by the TypedDicts of
webhookd.models; every error answer is raised as a Problem with its
status, code and field.
"""

from . import models
from .client import (DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_RETRY_WAIT, DEFAULT_TIMEOUT,
                     DEFAULT_USER_AGENT, Client, EventDetail, Feed, FeedEvent, IngestResult,
                     format_time, parse_time)
from .errors import Problem, TransportError, WebhookdError

__all__ = [
    "Client", "EventDetail", "Feed", "FeedEvent", "IngestResult", "Problem", "TransportError", "WebhookdError",
    "format_time", "parse_time", "models",
    "DEFAULT_MAX_ATTEMPTS", "DEFAULT_MAX_RETRY_WAIT", "DEFAULT_TIMEOUT", "DEFAULT_USER_AGENT",
]

__version__ = "0.1.0"
