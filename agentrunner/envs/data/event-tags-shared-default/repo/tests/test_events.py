import unittest

from events import make_event, summarize, with_tag


class EventsTest(unittest.TestCase):
    def test_make_event(self):
        event = make_event("login", tags=["user:42"])
        self.assertEqual(event["tags"], ["user:42", "level:info"])
        self.assertEqual(event["extra"], {"source": "app"})

    def test_events_in_a_loop(self):
        first = make_event("start")
        second = make_event("stop", level="warning")
        self.assertEqual(first["tags"], ["level:info"])
        self.assertEqual(second["tags"], ["level:warning"])

    def test_summarize(self):
        events = [make_event("a", tags=[]), make_event("b", level="error", tags=[])]
        self.assertEqual(summarize(events), {"info": 1, "error": 1})

    def test_with_tag(self):
        event = make_event("a", tags=["x"])
        tagged = with_tag(event, "y")
        self.assertEqual(tagged["tags"], ["x", "level:info", "y"])


if __name__ == "__main__":
    unittest.main()
