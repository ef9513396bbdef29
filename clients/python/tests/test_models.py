"""The generated models are the document's, and the client covers every
operation of the document."""

import json
import sys
import unittest
from pathlib import Path
from typing import Dict

import webhookd

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
import gen_models  # noqa: E402

# operations maps each operationId of the API's document to the Client
# method that calls it: its name in snake case, but listEvents, a walk
# with a cursor to resume from (Client.feed). not_called says why an
# operation has none.
operations: Dict[str, str] = {
    "listEvents": "feed",
}
not_called = {
    "metrics": "Prometheus scrapes it, in its own text format",
    "openapi": "the document is for generators and validators, not for calls",
    "webhook": "webhookd sends it; the receiver's side is docs/receiving.md",
    "endpointVerification": "webhookd sends it; the receiver answers it",
}
for _op in ("opEndpointCreated", "opEndpointUpdated", "opEndpointDeleted", "opEndpointDisabled",
            "opEndpointEnabled", "opEndpointFailing", "opEndpointRecovered", "opDeliveryDead",
            "opTenantDeleted", "opTaskFinished"):
    not_called[_op] = "webhookd sends it to the operational endpoints; the receiver reads it"


def snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


class ModelsTest(unittest.TestCase):
    def test_generated(self) -> None:
        want = gen_models.generate(json.loads(gen_models.DOCUMENT.read_text(encoding="utf-8")))
        got = gen_models.OUTPUT.read_text(encoding="utf-8")
        self.assertTrue(got == want, "webhookd/models.py is not the document's: "
                        "run python3 clients/python/gen_models.py")

    def test_covers_every_operation(self) -> None:
        doc = json.loads(gen_models.DOCUMENT.read_text(encoding="utf-8"))
        seen = 0
        for items in (doc.get("paths", {}), doc.get("webhooks", {})):
            for path, item in items.items():
                for method, op in item.items():
                    if not isinstance(op, dict) or "operationId" not in op:
                        continue
                    oid = op["operationId"]
                    seen += 1
                    if oid in not_called:
                        continue
                    name = operations.get(oid, snake(oid))
                    with self.subTest(oid):
                        self.assertTrue(callable(getattr(webhookd.Client, name, None)),
                                        f"{method.upper()} {path} ({oid}) has no Client.{name}: add it")
        self.assertGreater(seen, len(not_called))

    def test_python39_syntax(self) -> None:
        # The package says it runs on Python 3.9 (pyproject.toml): its
        # files parse as 3.9 does (mypy checks the annotations for 3.9).
        import ast
        for path in sorted(HERE.glob("**/*.py")):
            with self.subTest(str(path.relative_to(HERE))):
                ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=(3, 9))


if __name__ == "__main__":
    unittest.main()
