"""The script that follows npcd's action feed and performs each tick's
actions through the NPCs, storing the feed's cursor in its attributes. The
long poll runs off the reactor thread (deferToThread); the actions are
performed, and the cursor stored, back on the reactor thread. Create it
once: `@py evennia.create_script("typeclasses.npcd_script.NPCDFeedScript")`."""

from __future__ import annotations

from evennia import DefaultScript, search_tag
from evennia.utils import logger
from twisted.internet import reactor, threads

from typeclasses.npcd_npc import CLIENT, NPCD_SCOPE, TAG_CATEGORY
from world import npcmind

POLL_WAIT = 20.0  # seconds a poll waits for a commit (at most 30)
RETRY_DELAY = 5.0  # seconds after a failed poll


class NPCDFeedScript(DefaultScript):
    def at_script_creation(self):
        self.key = "npcd_feed"
        self.desc = "performs the actions of NPCs whose mind is npcd"
        self.persistent = True
        self.db.cursor = 0

    def at_start(self, **kwargs):
        self.ndb.feed = npcmind.FeedCursor(self.db.cursor or 0)
        self.ndb.running = True
        self._poll()

    def at_stop(self, **kwargs):
        self.ndb.running = False

    def _poll(self):
        if not self.ndb.running:
            return
        d = threads.deferToThread(CLIENT.actions, after=self.ndb.feed.cursor, wait=POLL_WAIT,
                                  scope=NPCD_SCOPE or None)
        d.addCallbacks(self._on_page, self._on_error)

    def _on_page(self, page):
        # On the reactor thread: perform, then store the cursor.
        try:
            self.ndb.feed.handle(page.ticks, self._perform)
        except Exception:
            logger.log_trace("npcd: performing the action feed")
        self.db.cursor = self.ndb.feed.cursor
        self._poll()

    def _on_error(self, failure):
        logger.log_err(f"npcd: the action feed: {failure.getErrorMessage()}; retrying")
        if self.ndb.running:
            reactor.callLater(RETRY_DELAY, self._poll)

    def _perform(self, tick):
        found = search_tag(tick.npc, category=TAG_CATEGORY)
        if not found:
            logger.log_info(f"npcd: no NPC tagged {tick.npc}; skipping its tick {tick.tick}")
            return
        for action in tick.actions:
            try:
                found[0].npcd_perform(action)
            except Exception:
                # One action the game cannot perform must not stop the feed.
                logger.log_trace(f"npcd: {tick.npc} tick {tick.tick}: {action.tool}")
