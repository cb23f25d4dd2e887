"""Tests of the client against a running npcd, named by NPCD_URL (and
NPCD_API_TOKEN if it needs one). Without NPCD_URL they fail: they test the
client with the real daemon, never with a stand-in."""

from __future__ import annotations

import os
import threading
import time
import unittest
import uuid

from npcd_client import ActionFeed, Client, Event, NpcdError

URL = os.environ.get("NPCD_URL", "")


def client() -> Client:
    if not URL:
        raise AssertionError("NPCD_URL is not set: run these tests against a running npcd (go test ./cmd/npcd -run Python does)")
    return Client(URL, token=os.environ.get("NPCD_API_TOKEN") or None, timeout=60)


def new_npc(c: Client, name: str = "Brom") -> str:
    """A fresh NPC of its own for each test, so tests share the daemon."""
    npc = f"py-{uuid.uuid4().hex[:12]}"
    assert c.create_npc(npc, {"name": name, "persona": f"You are {name}, the gruff village blacksmith of Oakvale."})
    return npc


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
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("Idempotency-Key", cm.exception.message)

    def test_batch_bad_id_fails_alone(self) -> None:
        npc = new_npc(self.c)
        say(self.c, npc, "Hello!")
        got = self.c.tick_many([npc, "Not An Id", "py-ghost"], keys={npc: "b-1"})
        self.assertEqual([r.npc for r in got.results], [npc])
        self.assertEqual(got.errors["Not An Id"]["code"], "bad_request")
        self.assertEqual(got.errors["py-ghost"]["code"], "not_found")
        again = self.c.tick_many([npc], keys={npc: "b-1"})
        self.assertEqual(again.results, got.results)

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


if __name__ == "__main__":
    unittest.main()
