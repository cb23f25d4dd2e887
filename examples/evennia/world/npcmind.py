"""The game-side logic of an Evennia NPC whose mind is npcd, in plain
functions that need neither Evennia nor Twisted (the typeclass and the
script in typeclasses/ are thin glue around them).

- ids: npc_id_for() makes an npcd NPC id from an object's key and dbid;
  actor_id_for() the stable id of a speaker; display_name() a name npcd
  shows unquoted.
- events: speech_from_message() finds the speech in what a room tells an
  object; speech_event() makes the event npcd perceives.
- actions: action_to_command() maps a tool call to a game command.
- the feed: FeedCursor performs each committed tick once per run, in order,
  and keeps the cursor the script stores.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from npcd_client import Action, Client, Event, FeedTick, NpcdError

# npcd's NPC ids and the characters it shows of a name (kind, actor, target,
# room: at most 64 letters, digits, spaces and ' ’ - _ . , # &).
_NPC_ID_BAD = re.compile(r"[^a-z0-9_-]+")
_NAME_BAD = re.compile(r"[^\w '’\-.,#&]+")


def npc_id_for(key: str, dbid: int | str) -> str:
    """The npcd id of an Evennia object: its key as a slug plus its dbid
    ("Brom the Smith", 12 -> "brom-the-smith-12"), within
    ^[a-z0-9_-]{1,64}$. The dbid keeps it stable and unique when the key
    changes or two NPCs share one; the key only makes it readable."""
    suffix = f"-{dbid}"
    ascii_key = unicodedata.normalize("NFKD", key).encode("ascii", "ignore").decode()
    slug = _NPC_ID_BAD.sub("-", ascii_key.lower()).strip("-")[: 64 - len(suffix)].strip("-")
    return (slug or "npc") + suffix


def actor_id_for(dbid: int | str) -> str:
    """The stable id of a speaker (its dbid, "#12" -> "obj-12"): what the
    NPC's profile of it keys on, so renaming a character keeps its profile
    and two characters of one name stay two."""
    return "obj-" + str(dbid).lstrip("#")


def display_name(name: str) -> str:
    """A name as npcd shows it: characters it refuses become spaces, at
    most 64 characters."""
    clean = " ".join(_NAME_BAD.sub(" ", name).split())[:64].strip()
    return clean or "someone"


# Evennia's say: '{object} says, "{speech}"' (and '{object} says: "..."').
_SAYS = re.compile(r'\bsays?[,:]?\s+"(?P<speech>.*)"\s*$', re.S)
_MARKUP = re.compile(r"\|[a-zA-Z0-9\[\]/_*^-]|\|\|")


def speech_from_message(text: Any) -> str | None:
    """The speech in what a room tells an object when someone speaks, or
    None for anything else. Evennia sends text as a string or as (string,
    {"type": "say", ...}); a whisper or a pose is not speech to the room."""
    kind = None
    if isinstance(text, (tuple, list)) and text:
        if len(text) > 1 and isinstance(text[1], Mapping):
            kind = text[1].get("type")
        text = text[0]
    if not isinstance(text, str) or (kind is not None and kind != "say"):
        return None
    m = _SAYS.search(_MARKUP.sub("", text))
    return m.group("speech").strip() if m and m.group("speech").strip() else None


def speech_event(speaker_dbid: int | str, speaker_name: str, text: str, room: str = "",
                 event_id: str | None = None, actor_ids: bool = True) -> Event:
    """The event an NPC perceives when a character speaks in its room. With
    actor_ids, the speaker is actor_id (its dbid) and actor_name (its key);
    else actor alone (a daemon without actor_id)."""
    name = display_name(speaker_name)
    ev = dict(kind="say", text=text, room=display_name(room) if room else "",
              id=event_id or uuid.uuid4().hex)
    if actor_ids:
        return Event(actor_id=actor_id_for(speaker_dbid), actor_name=name, **ev)
    return Event(actor=name, **ev)


def action_to_command(npc_name: str, action: Action) -> tuple[str, str] | None:
    """The game command for a tool call: ("say", text) to speak in the NPC's
    room, ("pose", text) to show text to the room as it is; None for a tool
    the game does not know (or an empty one), which it skips.

    emote's text has no subject: the NPC is it ("nods slowly" -> "Brom nods
    slowly"); a text that already starts with the NPC's name keeps it once."""
    text = str(action.args.get("text") or "").strip()
    if not text:
        return None
    if action.tool == "say":
        return ("say", text)
    if action.tool == "emote":
        if text.lower().startswith(npc_name.lower() + " "):
            text = text[len(npc_name) + 1:].lstrip()
        return ("pose", f"{npc_name} {text}")
    return None


class FeedCursor:
    """Performs the action feed's ticks in order, each once per run, and
    keeps the cursor to store. Construct it with the stored cursor; after
    handle(), store .cursor. A tick performed whose cursor was not stored
    (a crash in between) comes again after a restart: npcd delivers at
    least once, and (npc, tick) tells the duplicate within a run."""

    def __init__(self, cursor: int = 0) -> None:
        self.cursor = int(cursor or 0)
        self.last_tick: dict[str, int] = {}

    def handle(self, ticks: Iterable[FeedTick], perform: Callable[[FeedTick], None]) -> int:
        """Performs each tick after the cursor (perform(tick)) and moves the
        cursor past it; returns how many were performed. A perform that
        raises leaves the cursor before that tick."""
        done = 0
        for t in ticks:
            if t.cursor <= self.cursor:
                continue
            if t.tick > self.last_tick.get(t.npc, 0):
                perform(t)
                self.last_tick[t.npc] = t.tick
                done += 1
            self.cursor = t.cursor
        return done


class Mind:
    """The npcd side of the NPCs: registering them and posting what they
    perceive. Its calls block: call them off the reactor thread
    (deferToThread)."""

    def __init__(self, client: Client, scope: str = "", auto_tick: bool = True, actor_ids: bool = True) -> None:
        self.client = client
        self.scope = scope
        self.auto_tick = auto_tick
        self.actor_ids = actor_ids

    def register(self, npc: str, name: str, persona: str) -> bool:
        """Create NPC npc if missing (an existing one keeps the settings
        edited since). Returns whether it was created."""
        settings: dict[str, Any] = {"name": display_name(name), "persona": persona}
        if self.scope:
            settings["scope"] = self.scope
        if self.auto_tick:
            settings["auto_tick"] = {"enabled": True}
        return self.client.create_npc(npc, settings)

    def update(self, npc: str, persona: str) -> dict[str, Any]:
        """Change NPC npc's persona only (PATCH); its other settings and its
        memory stay."""
        return self.client.patch_npc(npc, {"persona": persona})

    def hear(self, npc: str, event: Event) -> None:
        """Post what NPC npc perceives. Without auto-tick, tick it now under
        a key made from the event, so a retry ticks nothing twice; the
        actions come through the feed either way."""
        try:
            self.client.post_events(npc, [event])
        except NpcdError as e:
            if e.status != 404:
                raise
            return  # not registered (yet): nothing to perceive with
        if not self.auto_tick:
            self.client.tick(npc, key=f"ev-{event.id}"[:128])
