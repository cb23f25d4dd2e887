"""Tests of the Evennia glue (typeclasses/) against a running npcd named by
NPCD_URL, with Evennia, Twisted and Django stubbed here, since Evennia is
not installed: an NPC hears a character speak, npcd ticks it, the feed
script performs its say in the room and stores the cursor."""

from __future__ import annotations

import importlib
import os
import re
import sys
import types
import unittest
import uuid
from collections.abc import Callable
from typing import Any

from npcd_client import Action, Client

URL = os.environ.get("NPCD_URL", "")


# --- stubs of what the glue imports


class Deferred:
    def __init__(self) -> None:
        self.callbacks: list[tuple[Callable[..., Any] | None, Callable[..., Any] | None, tuple[Any, ...]]] = []

    def addCallbacks(self, cb: Callable[..., Any], eb: Callable[..., Any]) -> Deferred:
        self.callbacks.append((cb, eb, ()))
        return self

    def addErrback(self, eb: Callable[..., Any], *args: Any) -> Deferred:
        self.callbacks.append((None, eb, args))
        return self


class Failure:
    def __init__(self, e: BaseException) -> None:
        self.value = e

    def getErrorMessage(self) -> str:
        return str(self.value)


class Reactor:
    """Runs deferToThread's calls when pumped, one at a time, in order."""

    def __init__(self) -> None:
        self.queue: list[tuple[Deferred, Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []
        self.later: list[float] = []

    def defer_to_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred:
        d = Deferred()
        self.queue.append((d, fn, args, kwargs))
        return d

    def callLater(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        self.later.append(delay)

    def pump(self, n: int) -> None:
        for _ in range(n):
            d, fn, args, kwargs = self.queue.pop(0)
            try:
                result: Any = fn(*args, **kwargs)
                ok = True
            except Exception as e:  # an errback's case
                result, ok = Failure(e), False
            for cb, eb, extra in d.callbacks:
                f = cb if ok else eb
                if f is not None:
                    result = f(result, *extra)
                    ok = not isinstance(result, Failure)


class Attrs(types.SimpleNamespace):
    def __getattr__(self, name: str) -> Any:  # unset attributes are None, as in Evennia
        return None


class Tags:
    registry: dict[tuple[str, str], list[Any]] = {}

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def add(self, tag: str, category: str = "") -> None:
        self.registry.setdefault((tag, category), []).append(self.obj)

    def has(self, tag: str, category: str = "") -> bool:
        return self.obj in self.registry.get((tag, category), [])


class Room:
    def __init__(self, key: str) -> None:
        self.key = key
        self.shown: list[str] = []

    def msg_contents(self, text: str, from_obj: Any = None, **kwargs: Any) -> None:
        self.shown.append(text)


class DefaultObject:
    _next_id = 10_000

    def __init__(self, key: str, location: Room | None = None) -> None:
        DefaultObject._next_id += 1
        self.id = DefaultObject._next_id + int(uuid.uuid4().int % 1_000_000) * 100_000
        self.key = key
        self.location = location
        self.db, self.ndb = Attrs(), Attrs()
        self.tags = Tags(self)
        self.said: list[str] = []

    def at_object_creation(self) -> None: ...
    def at_init(self) -> None: ...
    def at_script_creation(self) -> None: ...

    def at_msg_receive(self, text: Any = None, from_obj: Any = None, **kwargs: Any) -> bool:
        return True

    def at_say(self, message: str, **kwargs: Any) -> None:
        self.said.append(message)


REACTOR = Reactor()
LOG: list[str] = []


def install_stubs(settings: dict[str, Any]) -> None:
    def module(name: str, **attrs: Any) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    module("django")
    module("django.conf", settings=types.SimpleNamespace(**settings))
    evennia = module("evennia", DefaultCharacter=DefaultObject, DefaultScript=DefaultObject,
                     search_tag=lambda tag, category="": list(Tags.registry.get((tag, category), [])))
    logger = module("evennia.utils.logger", log_err=LOG.append, log_info=LOG.append, log_trace=LOG.append)
    evennia.utils = module("evennia.utils", logger=logger)
    internet = module("twisted.internet", reactor=REACTOR,
                      threads=types.SimpleNamespace(deferToThread=REACTOR.defer_to_thread))
    module("twisted").internet = internet


def doc_has(c: Client, pattern: str) -> bool:
    return re.search(pattern, c.openapi(), re.M) is not None


class GlueTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        if not URL:
            raise AssertionError("NPCD_URL is not set: run these tests against a running npcd "
                                 "(go test ./cmd/npcd -run TestEvenniaExample does)")
        c = Client(URL, token=os.environ.get("NPCD_API_TOKEN") or None, timeout=60)
        # The glue as configured for what the daemon has: actor ids and
        # auto-tick where it advertises them, else actor and a tick per event.
        cls.auto_tick = doc_has(c, r"^\s+auto_tick:")
        install_stubs({"NPCD_URL": URL, "NPCD_API_TOKEN": os.environ.get("NPCD_API_TOKEN") or None,
                       "NPCD_AUTO_TICK": cls.auto_tick, "NPCD_ACTOR_IDS": doc_has(c, r"^\s+actor_id:")})
        for name in ("typeclasses.npcd_npc", "typeclasses.npcd_script"):
            sys.modules.pop(name, None)
        cls.npc_mod = importlib.import_module("typeclasses.npcd_npc")
        cls.script_mod = importlib.import_module("typeclasses.npcd_script")
        cls.client = c

    def test_speech_in_the_room_is_answered_through_the_feed(self) -> None:
        forge = Room("The Forge")
        brom = self.npc_mod.NPCDCharacter("Brom", location=forge)
        brom.db.persona = "You are Brom, the gruff village blacksmith of Oakvale."
        brom.at_object_creation()
        REACTOR.pump(1)  # registered
        npc = brom.npcd_id
        self.assertRegex(npc, r"^brom-[0-9]+$")
        self.assertTrue(brom.tags.has(npc, category="npcd"))
        self.assertEqual(self.client.get_npc(npc)["name"], "Brom")

        brom.key = "Brom the Smith"  # renamed: the same NPC in npcd
        self.assertEqual(brom.npcd_id, npc)

        script = self.script_mod.NPCDFeedScript("npcd_feed")
        script.at_script_creation()
        self.assertEqual(script.db.cursor, 0)
        script.db.cursor = self.client.actions().cursor  # this daemon's earlier ticks are not ours

        alice = DefaultObject("Alice", location=forge)
        brom.at_msg_receive(('Alice says, "Good morning, smith!"', {"type": "say"}), from_obj=alice)
        # Its own speech, a whisper and a pose are not posted.
        brom.at_msg_receive(('Brom says, "Hello."', {"type": "say"}), from_obj=brom)
        brom.at_msg_receive(("Alice waves.", {"type": "pose"}), from_obj=alice)
        self.assertEqual(len(REACTOR.queue), 1)
        REACTOR.pump(1)  # posted (and ticked, without auto-tick)

        script.at_start()
        REACTOR.pump(1)  # one poll of the feed, waiting for the tick
        self.assertEqual(len(brom.said), 1, LOG)
        self.assertTrue(brom.said[0])
        feed = self.client.actions(npcs=[npc])
        self.assertEqual([t.tick for t in feed.ticks], [1])
        self.assertEqual(brom.said[0], feed.ticks[0].actions[0].args["text"])
        self.assertEqual(script.db.cursor, feed.ticks[0].cursor)
        self.assertEqual(len(REACTOR.queue), 1)  # polling again
        script.at_stop()
        REACTOR.queue.clear()

        # A restarted script resumes from the stored cursor: nothing again.
        again = self.script_mod.NPCDFeedScript("npcd_feed")
        again.db.cursor = script.db.cursor
        again.at_start()
        again.ndb.running = False  # one poll only
        REACTOR.queue[0][3]["wait"] = 0.2
        REACTOR.pump(1)
        self.assertEqual(len(brom.said), 1)

    def test_emote_poses_with_the_npc_as_subject(self) -> None:
        forge = Room("The Forge")
        brom = self.npc_mod.NPCDCharacter("Brom", location=forge)
        brom.npcd_perform(Action("c1", "emote", {"text": "wipes his hands on his apron."}))
        brom.npcd_perform(Action("c2", "open_door", {"door": "north"}))
        self.assertEqual(forge.shown, ["Brom wipes his hands on his apron."])
        self.assertTrue(any("open_door" in line for line in LOG))


if __name__ == "__main__":
    unittest.main()
