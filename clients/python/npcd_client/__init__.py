"""Python client of the npcd HTTP API (standard library only).

    from npcd_client import Client, Event

    npcd = Client("http://127.0.0.1:8740")
    npcd.create_npc("brom", {"name": "Brom", "persona": "You are Brom, the blacksmith."})
    npcd.post_events("brom", [Event(kind="say", actor="Alice", text="Hello!", id="ev-1")])
    result = npcd.tick("brom", key="brom-ev-1")
    for action in result.actions:
        ...  # perform action.tool with action.args in the game
"""

from .client import (
    Action,
    ActionFeed,
    BatchItem,
    BatchResult,
    Client,
    Event,
    Feed,
    FeedTick,
    NpcdError,
    TickResult,
)

__all__ = [
    "Action",
    "ActionFeed",
    "BatchItem",
    "BatchResult",
    "Client",
    "Event",
    "Feed",
    "FeedTick",
    "NpcdError",
    "TickResult",
]
