import unittest

from events import make_event, summarize, with_tag


class HiddenEventsTest(unittest.TestCase):
    def test_default_tags_not_shared(self):
        events = [make_event(f"e{i}") for i in range(3)]
        for event in events:
            self.assertEqual(event["tags"], ["level:info"])

    def test_default_extra_not_shared(self):
        first = make_event("a")
        first["extra"]["user"] = "alice"
        second = make_event("b")
        self.assertEqual(second["extra"], {"source": "app"})

    def test_callers_list_not_modified(self):
        tags = ["user:7"]
        event = make_event("login", tags=tags)
        self.assertEqual(tags, ["user:7"])
        self.assertEqual(event["tags"], ["user:7", "level:info"])

    def test_callers_dict_not_modified(self):
        extra = {"ip": "10.0.0.1"}
        event = make_event("login", extra=extra)
        self.assertEqual(extra, {"ip": "10.0.0.1"})
        self.assertEqual(event["extra"], {"ip": "10.0.0.1", "source": "app"})

    def test_same_list_reused_for_several_events(self):
        shared = ["batch:1"]
        first = make_event("a", tags=shared)
        second = make_event("b", level="error", tags=shared)
        self.assertEqual(first["tags"], ["batch:1", "level:info"])
        self.assertEqual(second["tags"], ["batch:1", "level:error"])

    def test_explicit_source_kept(self):
        event = make_event("a", extra={"source": "cron"})
        self.assertEqual(event["extra"], {"source": "cron"})

    def test_unknown_level(self):
        with self.assertRaises(ValueError):
            make_event("a", level="loud")

    def test_with_tag_leaves_original(self):
        event = make_event("a")
        with_tag(event, "x")
        self.assertEqual(event["tags"], ["level:info"])

    def test_summarize(self):
        events = [make_event("a"), make_event("b"), make_event("c", level="debug")]
        self.assertEqual(summarize(events), {"info": 2, "debug": 1})


if __name__ == "__main__":
    unittest.main()
