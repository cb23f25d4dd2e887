"""An Evennia NPC whose mind is npcd: it registers itself, and posts what
is said in its room as events (off the reactor thread). What it does comes
back through the action feed (typeclasses/npcd_script.py), which calls
npcd_perform. The logic is in world/npcmind.py; this is glue."""

from __future__ import annotations

from django.conf import settings
from evennia import DefaultCharacter
from evennia.utils import logger
from twisted.internet import threads

from npcd_client import Client
from world import npcmind

# Settings (server/conf/settings.py), all optional.
NPCD_URL = getattr(settings, "NPCD_URL", "http://127.0.0.1:8740")
NPCD_API_TOKEN = getattr(settings, "NPCD_API_TOKEN", None)
NPCD_SCOPE = getattr(settings, "NPCD_SCOPE", "")
NPCD_AUTO_TICK = getattr(settings, "NPCD_AUTO_TICK", True)
NPCD_ACTOR_IDS = getattr(settings, "NPCD_ACTOR_IDS", True)

CLIENT = Client(NPCD_URL, token=NPCD_API_TOKEN)
MIND = npcmind.Mind(CLIENT, scope=NPCD_SCOPE, auto_tick=NPCD_AUTO_TICK, actor_ids=NPCD_ACTOR_IDS)

# The tag category under which each NPC keeps its npcd id (the feed
# script finds the NPC of a tick by it).
TAG_CATEGORY = "npcd"


def _log_failure(failure, what):
    logger.log_err(f"npcd: {what}: {failure.getErrorMessage()}")


class NPCDCharacter(DefaultCharacter):
    """An NPC with a mind. Change its persona with
    `@set Brom/persona = You are Brom, the village blacksmith.` and then
    `@py here.search("Brom").npcd_update()`."""

    @property
    def npcd_id(self) -> str:
        # Made once from the key and dbid and kept: a renamed NPC keeps it.
        if not self.db.npcd_id:
            self.db.npcd_id = npcmind.npc_id_for(self.key, self.id)
        return self.db.npcd_id

    def at_object_creation(self):
        super().at_object_creation()
        if not self.db.persona:
            self.db.persona = f"You are {self.key}, who lives here."
        self.tags.add(self.npcd_id, category=TAG_CATEGORY)
        self.npcd_register()

    def at_init(self):
        # Every server start: create in npcd if missing, keep its edits.
        super().at_init()
        self.npcd_register()

    def npcd_register(self):
        npc, name, persona = self.npcd_id, self.key, self.db.persona or f"You are {self.key}."
        if not self.tags.has(npc, category=TAG_CATEGORY):
            self.tags.add(npc, category=TAG_CATEGORY)
        d = threads.deferToThread(MIND.register, npc, name, persona)
        d.addErrback(_log_failure, f"registering {npc}")
        return d

    def npcd_update(self):
        """Send the persona edited with @set to npcd (registration never
        overwrites it)."""
        d = threads.deferToThread(MIND.update, self.npcd_id, self.db.persona)
        d.addErrback(_log_failure, f"updating {self.npcd_id}")
        return d

    def at_msg_receive(self, text=None, from_obj=None, **kwargs):
        # Its own speech is already in its history: never post it back.
        if from_obj is not None and from_obj != self:
            speech = npcmind.speech_from_message(text)
            if speech:
                room = self.location.key if self.location else ""
                event = npcmind.speech_event(from_obj.id, from_obj.key, speech, room=room,
                                             actor_ids=MIND.actor_ids)
                d = threads.deferToThread(MIND.hear, self.npcd_id, event)
                d.addErrback(_log_failure, f"posting to {self.npcd_id}")
        return super().at_msg_receive(text=text, from_obj=from_obj, **kwargs)

    def npcd_perform(self, action):
        """Performs one of npcd's tool calls as a game command (on the
        reactor thread)."""
        cmd = npcmind.action_to_command(self.key, action)
        if cmd is None:
            logger.log_info(f"npcd: {self.key} skips tool {action.tool!r}")
            return
        verb, text = cmd
        if verb == "say":
            self.at_say(text)
        elif verb == "pose" and self.location:
            self.location.msg_contents(text, from_obj=self)
