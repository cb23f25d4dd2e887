"""Tests of world/npcmind.py: plain functions, no Evennia and no daemon."""

from __future__ import annotations

import re
import unittest

from npcd_client import Action, FeedTick
from world import npcmind


def tick(cursor: int, npc: str, n: int) -> FeedTick:
    return FeedTick(cursor=cursor, npc=npc, tick=n, at="2026-01-01T00:00:00Z",
                    actions=[Action("c1", "say", {"text": f"{npc} {n}"})], awaiting=[], text="")


class IdsTest(unittest.TestCase):
    def test_npc_ids_follow_npcd_rules(self) -> None:
        self.assertEqual(npcmind.npc_id_for("Brom the Smith", 12), "brom-the-smith-12")
        self.assertEqual(npcmind.npc_id_for("Ærin O'Malley!", 7), "rin-o-malley-7")
        self.assertEqual(npcmind.npc_id_for("???", 3), "npc-3")
        self.assertEqual(npcmind.npc_id_for("Zoë", 9), "zoe-9")
        long = npcmind.npc_id_for("x" * 200, 123456)
        self.assertEqual(len(long), 64)
        self.assertTrue(long.endswith("-123456"))
        for key in ("Brom", "A  B", "-x-", "Zoë", "a" * 70):
            self.assertRegex(npcmind.npc_id_for(key, 9), r"^[a-z0-9_-]{1,64}$")
        # Two NPCs of one key stay two.
        self.assertNotEqual(npcmind.npc_id_for("Guard", 1), npcmind.npc_id_for("Guard", 2))

    def test_actor_ids_and_names(self) -> None:
        self.assertEqual(npcmind.actor_id_for("#12"), "obj-12")
        self.assertEqual(npcmind.actor_id_for(12), "obj-12")
        self.assertRegex(npcmind.actor_id_for(99), r"^[A-Za-z0-9_.:@-]{1,128}$")
        self.assertEqual(npcmind.display_name('Bob: "the <b>Bold</b>"'), "Bob the b Bold b")
        self.assertEqual(npcmind.display_name("O'Hara-Smith, Jr. #2 & co_op"), "O'Hara-Smith, Jr. #2 & co_op")
        self.assertEqual(npcmind.display_name("::"), "someone")
        self.assertEqual(len(npcmind.display_name("a" * 100)), 64)


class EventsTest(unittest.TestCase):
    def test_speech_from_room_messages(self) -> None:
        self.assertEqual(npcmind.speech_from_message('Alice says, "Hello there!"'), "Hello there!")
        self.assertEqual(npcmind.speech_from_message(('Alice says, "Hi"', {"type": "say"})), "Hi")
        self.assertEqual(npcmind.speech_from_message('|cAlice|n says, "He said "no"."'), 'He said "no".')
        self.assertIsNone(npcmind.speech_from_message(('Alice whispers, "psst"', {"type": "whisper"})))
        self.assertIsNone(npcmind.speech_from_message("Alice smiles."))
        self.assertIsNone(npcmind.speech_from_message('Alice says, ""'))
        self.assertIsNone(npcmind.speech_from_message(None))

    def test_speech_event(self) -> None:
        ev = npcmind.speech_event(12, "Alice", "Hello!", room="The Forge", event_id="e1")
        self.assertEqual(ev.to_json(), {"kind": "say", "id": "e1", "actor_id": "obj-12", "actor_name": "Alice",
                                        "text": "Hello!", "room": "The Forge"})
        old = npcmind.speech_event(12, "Alice: the Bold", "Hi", event_id="e2", actor_ids=False)
        self.assertEqual(old.to_json(), {"kind": "say", "id": "e2", "actor": "Alice the Bold", "text": "Hi"})
        self.assertTrue(re.fullmatch(r"[0-9a-f]{32}", npcmind.speech_event(1, "A", "x").id))


class CommandsTest(unittest.TestCase):
    def test_tools_map_to_commands(self) -> None:
        cmd = npcmind.action_to_command
        self.assertEqual(cmd("Brom", Action("1", "say", {"text": " Welcome! "})), ("say", "Welcome!"))
        self.assertEqual(cmd("Brom", Action("2", "emote", {"text": "nods slowly."})), ("pose", "Brom nods slowly."))
        self.assertEqual(cmd("Brom", Action("3", "emote", {"text": "Brom wipes his hands."})),
                         ("pose", "Brom wipes his hands."))
        self.assertIsNone(cmd("Brom", Action("4", "give_quest", {"text": "x"})))
        self.assertIsNone(cmd("Brom", Action("5", "say", {})))


class FeedCursorTest(unittest.TestCase):
    def test_performs_each_tick_once_in_order(self) -> None:
        done: list[tuple[str, int]] = []
        feed = npcmind.FeedCursor(cursor=3)
        n = feed.handle([tick(2, "a", 1), tick(4, "a", 2), tick(5, "b", 1)], lambda t: done.append((t.npc, t.tick)))
        self.assertEqual((n, feed.cursor, done), (2, 5, [("a", 2), ("b", 1)]))
        # A page delivered again (a retried poll) performs nothing.
        self.assertEqual(feed.handle([tick(4, "a", 2), tick(5, "b", 1)], lambda t: done.append((t.npc, t.tick))), 0)
        self.assertEqual(len(done), 2)

    def test_a_failed_perform_keeps_the_cursor_before_it(self) -> None:
        feed = npcmind.FeedCursor(cursor=0)

        def perform(t: FeedTick) -> None:
            if t.cursor == 2:
                raise RuntimeError("the room is gone")

        with self.assertRaises(RuntimeError):
            feed.handle([tick(1, "a", 1), tick(2, "a", 2), tick(3, "a", 3)], perform)
        self.assertEqual(feed.cursor, 1)


if __name__ == "__main__":
    unittest.main()
