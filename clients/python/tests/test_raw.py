"""The client's reading of an answer's raw members (raw_event), with no
server: the spans the standard library's decoder delimits."""

import json
import unittest

from webhookd.client import _elements, _members, _raw_event
from webhookd.errors import WebhookdError


class RawTest(unittest.TestCase):
    def test_members(self) -> None:
        text = ' { "a" : 1 , "event":{"id":"evt_1","data":{"s":"}, \\"x\\": {[","é":"\\u00e9"}} ,"z":[1,{"event":2}]}'
        spans = _members(text, 0)
        self.assertEqual(sorted(spans), ["a", "event", "z"])
        start, end = spans["event"]
        self.assertEqual(json.loads(text[start:end]), json.loads(text)["event"])
        self.assertEqual(_raw_event("/p", text, 0), text[start:end].encode("utf-8"))

    def test_elements(self) -> None:
        text = '{"data": [ {"event":{"n":1}} , {"event":{"n":"]"}}],"has_more":false}'
        data = _members(text, 0)["data"]
        starts = _elements(text, data[0])
        self.assertEqual([_raw_event("/p", text, i) for i in starts], [b'{"n":1}', b'{"n":"]"}'])
        self.assertEqual(_elements('[]', 0), [])

    def test_no_event(self) -> None:
        for text in ('{"events":{}}', '[1]', '{"event":', ''):
            with self.subTest(text=text):
                with self.assertRaises(WebhookdError):
                    _raw_event("/p", text, 0)


if __name__ == "__main__":
    unittest.main()
