# A webhookd receiver with Python's standard library: check the raw bytes
# (Standard Webhooks), then parse them. With `pip install standardwebhooks`
# the check is standardwebhooks.Webhook(secret).verify(body, headers).
import base64
import hashlib
import hmac
import json
import os
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

SECRET = os.environ["WEBHOOK_SECRET"]  # the endpoint's "whsec_…"
KEY = base64.b64decode(SECRET[len("whsec_"):])
TOLERANCE = 5 * 60  # seconds between webhook-timestamp and our clock


def verify(headers, body: bytes) -> dict:
    msg_id = headers.get("webhook-id", "")
    timestamp = headers.get("webhook-timestamp", "")
    signatures = headers.get("webhook-signature", "")
    if not (msg_id and timestamp.isdigit() and signatures):
        raise ValueError("missing webhook headers")
    if abs(time.time() - int(timestamp)) > TOLERANCE:
        raise ValueError("timestamp outside the tolerance")
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(KEY, signed, hashlib.sha256).digest()).decode()
    # "v1,<base64>" per key, separated by spaces: two during a rotation.
    for signature in signatures.split(" "):
        version, _, value = signature.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return json.loads(body)
    raise ValueError("no matching signature")


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)  # the raw bytes, exactly as signed
        try:
            event = verify(self.headers, body)
        except ValueError as err:
            print(f"rejected: {err}", flush=True)
            self.send_response(401)
            self.end_headers()
            return
        # Process the event once per webhook-id: it may come more than once.
        print(f"verified {self.headers['webhook-id']} {event['type']}", flush=True)
        self.send_response(204)
        self.end_headers()


HTTPServer(("127.0.0.1", int(os.environ.get("PORT", 8000))), Receiver).serve_forever()
