"""Tests of the client against a running npcd, named by NPCD_URL (and
NPCD_API_TOKEN if it needs one). Without NPCD_URL they fail: they test the
client with the real daemon, never with a stand-in."""

from __future__ import annotations

import functools
import os
import re
import threading
import time
import unittest
import uuid

from npcd_client import ActionFeed, BatchItem, Client, Event, NpcdError

URL = os.environ.get("NPCD_URL", "")


def client() -> Client:
    if not URL:
        raise AssertionError("NPCD_URL is not set: run these tests against a running npcd (go test ./cmd/npcd -run Python does)")
    return Client(URL, token=os.environ.get("NPCD_API_TOKEN") or None, timeout=60)


def new_npc(c: Client, name: str = "Brom", **extra: object) -> str:
    """A fresh NPC of its own for each test, so tests share the daemon."""
    npc = f"py-{uuid.uuid4().hex[:12]}"
    settings = {"name": name, "persona": f"You are {name}, the gruff village blacksmith of Oakvale.", **extra}
    assert c.create_npc(npc, settings)
    return npc


@functools.cache
def advertised() -> tuple[dict[str, set[str]], str]:
    """The methods by path of the daemon's OpenAPI document, and the
    document: tests of API additions run exactly when the daemon has them
    (the document is the one it embeds, kept in step with its routes)."""
    doc = client().openapi()
    paths: dict[str, set[str]] = {}
    in_paths, current = False, None
    for line in doc.splitlines():
        if line[:1].strip():
            in_paths, current = line.startswith("paths:"), None
            continue
        if not in_paths:
            continue
        if m := re.match(r"^  (/\S*):\s*$", line):
            current = paths.setdefault(m.group(1), set())
        elif (m := re.match(r"^    (get|put|post|patch|delete):\s*$", line)) and current is not None:
            current.add(m.group(1))
    return paths, doc


def has(method: str, path: str) -> bool:
    return method in advertised()[0].get(path, set())


def doc_has(pattern: str) -> bool:
    """Whether the document matches pattern: a key (a property, a media
    type), not a mere mention in a description."""
    return re.search(pattern, advertised()[1], re.M) is not None


def require(test: unittest.TestCase, cond: bool, what: str) -> None:
    if not cond:
        test.skipTest(f"the daemon does not advertise {what} yet")


def say(c: Client, npc: str, text: str) -> None:
    got = c.post_events(npc, [Event(kind="say", actor="Alice", text=text, id=uuid.uuid4().hex)])
    assert got["accepted"] == 1, got


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()

    def test_health(self) -> None:
        self.assertEqual(self.c.health()["status"], "ok")

    def test_create_only_keeps_edits(self) -> None:
        npc = new_npc(self.c)
        settings = {"name": "Brom", "persona": "You are Brom, who lost his hammer."}
        _, created = self.c.put_npc(npc, settings)
        self.assertFalse(created)
        self.assertFalse(self.c.create_npc(npc, {"name": "Brom", "persona": "Something else."}))
        self.assertEqual(self.c.get_npc(npc)["persona"], settings["persona"])

    def test_tick_with_key_is_idempotent(self) -> None:
        npc = new_npc(self.c)
        say(self.c, npc, "Good morning, smith!")
        first = self.c.tick(npc, key="turn-1")
        self.assertFalse(first.idle)
        self.assertEqual(first.tick, 1)
        self.assertEqual(first.actions[0].tool, "say")
        self.assertTrue(first.actions[0].args["text"])
        say(self.c, npc, "Can you mend my sword?")
        again = self.c.tick(npc, key="turn-1")
        self.assertEqual(again, first)
        self.assertEqual(again.raw, first.raw)
        self.assertEqual(self.c.get_tick(npc, 1), first)
        second = self.c.tick(npc, key="turn-2")
        self.assertEqual(second.tick, 2)

    def test_errors(self) -> None:
        npc = new_npc(self.c)
        with self.assertRaises(NpcdError) as cm:
            self.c.get_tick(npc, 99)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        with self.assertRaises(NpcdError) as cm:
            self.c.tick(npc, key="has space")
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "Idempotency-Key"))
        self.assertIn("Idempotency-Key", cm.exception.message)
        with self.assertRaises(NpcdError) as cm:
            self.c.post_events(npc, [Event(kind="say", actor="Brom", text="I am me.")])
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.field),
                         (422, "invalid_value", "events[0].actor"))

    def test_batch_bad_id_fails_alone(self) -> None:
        npc = new_npc(self.c)
        say(self.c, npc, "Hello!")
        got = self.c.tick_many([npc, "Not An Id", "py-ghost"], keys={npc: "b-1"})
        self.assertEqual([r.npc for r in got.results], [npc])
        self.assertEqual(got.errors["Not An Id"]["code"], "bad_request")
        self.assertEqual(got.errors["py-ghost"]["code"], "not_found")
        again = self.c.tick_many([npc], keys={npc: "b-1"})
        self.assertEqual(again.results, got.results)

    def test_tick_carries_events(self) -> None:
        npc = new_npc(self.c)
        events = [Event(kind="say", actor="alice", text="Hello, smith!", id="py-t1")]
        first, posted = self.c.tick_with_events(npc, events, key="t-1")
        self.assertEqual((first.tick, first.events, posted), (1, 1, {"accepted": 1, "duplicates": 0}))
        again, posted = self.c.tick_with_events(npc, events, key="t-1")
        self.assertEqual((again, posted), (first, {"accepted": 0, "duplicates": 1}))
        with self.assertRaises(NpcdError) as cm:
            self.c.tick_with_events(npc, [{"kind": "", "actor": "alice", "text": "Hm?"}])
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "events[0].kind"))

    def test_batch_carries_events(self) -> None:
        a, b = new_npc(self.c, "Brom"), new_npc(self.c, "Mira")
        events = {a: [Event(kind="say", actor="alice", text="Hello, smith!", id="py-e1")],
                  b: [{"kind": "say", "actor": "alice", "text": "Bread?", "at": "yesterday"}]}
        got = self.c.tick_many([a, b], keys={a: "w-1"}, events=events)
        self.assertEqual(got.events[a], {"accepted": 1, "duplicates": 0})
        self.assertEqual(got.events[b]["code"], "bad_request")
        self.assertEqual({r.npc: r.events for r in got.results}, {a: 1, b: 0})
        again = self.c.tick_many([a, b], keys={a: "w-1"}, events=events)
        self.assertEqual(again.events[a], {"accepted": 0, "duplicates": 1})
        self.assertEqual([r.tick for r in again.results if r.npc == a], [r.tick for r in got.results if r.npc == a])
        items = list(self.c.tick_many_stream([a], events={a: [Event(kind="say", actor="alice", text="Sword?")]}))
        self.assertEqual(items[0].events, {"npc": a, "accepted": 1, "duplicates": 0})
        self.assertEqual(items[0].npc, a)
        self.assertEqual(items[1].result.events, 1)

    def test_batch_stream_yields_every_npc(self) -> None:
        a, b = new_npc(self.c, "Brom"), new_npc(self.c, "Mira")
        say(self.c, a, "Hello, smith!")
        say(self.c, b, "Hello, baker!")
        items = list(self.c.tick_many_stream([a, b, "Not An Id", "py-ghost"]))
        self.assertTrue(all(isinstance(i, BatchItem) for i in items))
        self.assertEqual(sorted(i.npc for i in items if i.result), sorted([a, b]))
        for i in items:
            if i.result:
                self.assertEqual(i.result.actions[0].tool, "say")
        errors = {i.npc: i.error["code"] for i in items if i.error}
        self.assertEqual(errors, {"Not An Id": "bad_request", "py-ghost": "not_found"})

    def test_feed_resumes_from_cursor(self) -> None:
        a, b = new_npc(self.c, "Brom"), new_npc(self.c, "Mira")
        for i in range(3):
            say(self.c, a, f"Round {i}, smith?")
            say(self.c, b, f"Round {i}, baker?")
            self.c.tick_many([a, b])
        seen: dict[str, list[int]] = {a: [], b: []}
        # A game handles two ticks, stores its cursor and "restarts" (a new
        # client and feed from the stored cursor), until it is done.
        stored = 0
        for _ in range(10):
            feed = ActionFeed(client(), cursor=stored, wait=0.2, limit=2, npcs=[a, b])
            ticks = feed.poll()
            if not ticks:
                break
            for t in ticks:
                self.assertGreater(t.cursor, stored)
                self.assertTrue(t.actions)
                seen[t.npc].append(t.tick)
                stored = t.cursor
        self.assertEqual(seen, {a: [1, 2, 3], b: [1, 2, 3]})

    def test_feed_iterator_waits_for_new_ticks(self) -> None:
        npc = new_npc(self.c)
        start = self.c.actions(npcs=[npc]).cursor
        feed = ActionFeed(self.c, cursor=start, wait=10, npcs=[npc])

        def later() -> None:
            time.sleep(0.2)
            say(self.c, npc, "Anyone here?")
            self.c.tick(npc)

        threading.Thread(target=later, daemon=True).start()
        t = next(iter(feed))
        self.assertEqual((t.npc, t.tick), (npc, 1))
        self.assertEqual(feed.cursor, t.cursor)
        self.assertEqual(t.actions, self.c.get_tick(npc, 1).actions)



class NextTest(unittest.TestCase):
    """API additions: each runs when the daemon advertises it."""

    def setUp(self) -> None:
        self.c = client()

    def test_patch_changes_single_settings(self) -> None:
        require(self, has("patch", "/v1/npcs/{npc}"), "PATCH /v1/npcs/{npc}")
        npc = new_npc(self.c)
        before = self.c.get_npc(npc)
        after = self.c.patch_npc(npc, {"persona": "You are Brom, who found his hammer."})
        self.assertEqual(after["persona"], "You are Brom, who found his hammer.")
        self.assertEqual((after["name"], after["context_window"]), (before["name"], before["context_window"]))
        self.assertEqual(self.c.get_npc(npc), after)
        with self.assertRaises(NpcdError) as cm:
            self.c.patch_npc(f"py-ghost-{uuid.uuid4().hex[:8]}", {"persona": "x"})
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))

    def test_scope(self) -> None:
        require(self, doc_has(r"^\s+scope:") and has("patch", "/v1/npcs/{npc}"), "scope")
        s1, s2 = f"g-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        a, b = new_npc(self.c, "Brom", scope=s1), new_npc(self.c, "Mira", scope=s1)
        other = new_npc(self.c, "Odo", scope=s2)
        self.assertEqual(self.c.get_npc(a)["scope"], s1)
        for n in (a, b, other):
            say(self.c, n, "Hello there!")
        got = self.c.tick_many(scope=s1)
        self.assertEqual(sorted(r.npc for r in got.results), sorted([a, b]))
        self.assertEqual(got.errors, {})
        self.assertEqual(self.c.tick(other).tick, 1)  # its events were still pending
        self.assertEqual({t.npc for t in self.c.actions(scope=s1).ticks}, {a, b})
        # A malformed value is refused naming the field (400, as PUT does, or 422).
        with self.assertRaises(NpcdError) as cm:
            self.c.patch_npc(a, {"scope": "Not A Scope"})
        self.assertIn(cm.exception.status, (400, 422))
        self.assertEqual(cm.exception.field, "scope")
        self.assertEqual(self.c.get_npc(a)["scope"], s1)

    def test_actor_id_and_name(self) -> None:
        require(self, doc_has(r"^\s+actor_id:"), "actor_id")
        npc = new_npc(self.c)
        got = self.c.post_events(npc, [
            Event(kind="say", actor_id="char:12", actor_name="Alice", text="I am Alice.", id=uuid.uuid4().hex),
            Event(kind="say", actor_id="char:12", actor_name="Alice the Bold", text="Renamed.", id=uuid.uuid4().hex),
        ])
        self.assertEqual(got["accepted"], 2)
        self.assertFalse(self.c.tick(npc).idle)
        with self.assertRaises(NpcdError) as cm:
            self.c.post_events(npc, [Event(kind="say", actor_id="has space", actor_name="Bob", text="x")])
        self.assertIn(cm.exception.status, (400, 422))
        self.assertEqual(cm.exception.field, "events[0].actor_id")

    def test_auto_tick_delivers_through_the_feed(self) -> None:
        require(self, doc_has(r"^\s+auto_tick:") and has("patch", "/v1/npcs/{npc}"), "auto_tick")
        npc = new_npc(self.c)
        self.c.patch_npc(npc, {"auto_tick": {"enabled": True, "debounce_ms": 20, "max_wait_ms": 200}})
        start = self.c.actions(npcs=[npc]).cursor
        say(self.c, npc, "Is anyone at the forge?")
        t = next(iter(ActionFeed(self.c, cursor=start, wait=10, npcs=[npc])))
        self.assertEqual((t.npc, t.tick), (npc, 1))
        self.assertEqual(t.actions[0].tool, "say")

    def test_stream_resumes_from_cursor(self) -> None:
        require(self, has("get", "/v1/actions/stream"), "GET /v1/actions/stream")
        npc = new_npc(self.c)
        start = self.c.actions(npcs=[npc]).cursor
        for text in ("Anyone here?", "Hello?", "Still there?"):
            say(self.c, npc, text)
            self.c.tick(npc)
        got = []
        for t in self.c.stream(after=start, npcs=[npc]):
            got.append(t)
            if len(got) == 2:
                break
        self.assertEqual([(t.npc, t.tick) for t in got], [(npc, 1), (npc, 2)])
        self.assertEqual(got[0].actions, self.c.get_tick(npc, 1).actions)
        # A restarted game resumes after the last cursor it handled.
        t = next(iter(self.c.stream(after=got[1].cursor, npcs=[npc])))
        self.assertEqual((t.npc, t.tick), (npc, 3))

    def test_batch_streams_ndjson(self) -> None:
        require(self, doc_has(r"^\s+application/x-ndjson:"), "application/x-ndjson")
        npc = new_npc(self.c)
        say(self.c, npc, "Hello!")
        with self.c._open("POST", "/v1/tick", body={"npcs": [npc, "Not An Id"]},
                          headers={"Accept": "application/x-ndjson"}) as resp:
            self.assertEqual(resp.status, 200)
            self.assertTrue(resp.headers.get("Content-Type", "").startswith("application/x-ndjson"))
            lines = [line for line in resp.read().decode().split("\n") if line]
        self.assertEqual(len(lines), 2)
        self.assertIn(npc, lines[0] + lines[1])


if __name__ == "__main__":
    unittest.main()
