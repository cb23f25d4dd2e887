"""The npcd client: typed results, idempotent ticks and the action feed."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8740"
# Above npcd's default tick timeout (2 minutes), as the Go client's.
DEFAULT_TIMEOUT = 180.0


# A message that names its field starts with it: "events[0].actor: ...".
_FIELD_PREFIX = re.compile(r"^([A-Za-z_{][A-Za-z0-9_.\-\[\]{}]*): ")


class NpcdError(Exception):
    """An error answer of npcd: its HTTP status, its code (e.g. "not_found",
    "exists", "invalid_value", "too_busy"), the field it names when it names
    one (e.g. "events[0].actor", "Idempotency-Key"; else None) and its
    message, safe to show. retry_after is the wait npcd asked for (429, 503)
    in seconds, or None."""

    def __init__(self, status: int, code: str, message: str, retry_after: float | None = None,
                 field: str | None = None) -> None:
        super().__init__(f"npcd: HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.field = field


@dataclass(frozen=True)
class Event:
    """One thing an NPC perceives. id makes posting it idempotent; at (the
    game's clock) defaults to now; self_ marks the NPC's own act. actor_id
    is the actor's stable identity in the game (what the NPC's profile of
    it keys on, ^[A-Za-z0-9_.:@-]{1,128}$) and actor_name how it is shown;
    actor alone is both."""

    kind: str
    text: str = ""
    actor: str = ""
    target: str = ""
    room: str = ""
    id: str = ""
    at: datetime | None = None
    self_: bool = False
    actor_id: str = ""
    actor_name: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for name in ("id", "actor", "actor_id", "actor_name", "target", "text", "room"):
            if value := getattr(self, name):
                out[name] = value
        if self.at is not None:
            out["at"] = self.at.isoformat().replace("+00:00", "Z")
        if self.self_:
            out["self"] = True
        return out


@dataclass(frozen=True)
class Action:
    """A game tool call: perform tool with args. Calls whose ids are in a
    tick's awaiting need their result posted back (post_tool_results)."""

    call_id: str
    tool: str
    args: dict[str, Any]

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Action:
        return Action(call_id=d["call_id"], tool=d["tool"], args=dict(d.get("args") or {}))


@dataclass(frozen=True)
class TickResult:
    """What one tick did. raw holds the whole answer (context, usage, ...)."""

    npc: str
    tick: int
    idle: bool
    actions: list[Action]
    awaiting: list[str]
    text: str
    events: int
    warnings: list[str]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> TickResult:
        return TickResult(
            npc=d["npc"],
            tick=int(d["tick"]),
            idle=bool(d["idle"]),
            actions=[Action.from_json(a) for a in d.get("actions") or []],
            awaiting=list(d.get("awaiting") or []),
            text=d.get("text", ""),
            events=int(d.get("events", 0)),
            warnings=list(d.get("warnings") or []),
            raw=dict(d),
        )


@dataclass(frozen=True)
class BatchResult:
    """A batch tick: the NPCs that ticked and, by NPC id, the failures of the
    others (each a dict with code and error)."""

    results: list[TickResult]
    errors: dict[str, dict[str, str]]
    # What became of the events the request carried, by NPC id: accepted
    # and duplicates, and code and error when they were refused.
    events: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchItem:
    """One NPC of a streamed batch tick, as it finished: its result, or its
    error (a dict with npc, code and error); or, before any of these, what
    became of the events the request carried for it (a dict with npc,
    accepted and duplicates, and code and error when they were refused)."""

    result: TickResult | None = None
    error: dict[str, str] | None = None
    events: dict[str, Any] | None = None

    @property
    def npc(self) -> str:
        if self.result:
            return self.result.npc
        return (self.error or self.events or {}).get("npc", "")


@dataclass(frozen=True)
class FeedTick:
    """One committed tick in the action feed. cursor grows in commit order."""

    cursor: int
    npc: str
    tick: int
    at: str
    actions: list[Action]
    awaiting: list[str]
    text: str

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> FeedTick:
        return FeedTick(
            cursor=int(d["cursor"]),
            npc=d["npc"],
            tick=int(d["tick"]),
            at=d["at"],
            actions=[Action.from_json(a) for a in d.get("actions") or []],
            awaiting=list(d.get("awaiting") or []),
            text=d.get("text", ""),
        )


@dataclass(frozen=True)
class Feed:
    """A page of the action feed; pass cursor as after next time."""

    ticks: list[FeedTick]
    cursor: int


class Client:
    """A client of one npcd daemon. Calls block; run them off a game's main
    loop (a thread, or run_in_executor). Safe to share between threads."""

    def __init__(self, base_url: str = DEFAULT_URL, token: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # --- NPCs

    def put_npc(self, npc: str, settings: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create NPC npc or replace its settings (its memory is kept).
        Returns the NPC as stored and whether it was created."""
        status, body = self._call("PUT", self._npc(npc), body=settings)
        return body, status == 201

    def create_npc(self, npc: str, settings: Mapping[str, Any]) -> bool:
        """Create NPC npc only if it does not exist; an existing one is left
        as it is. Returns whether it was created. Register NPCs with it at
        every start of the game, so settings edited since survive."""
        try:
            self._call("PUT", self._npc(npc), body=settings, headers={"If-None-Match": "*"})
        except NpcdError as e:
            if e.status == 412:
                return False
            raise
        return True

    def patch_npc(self, npc: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Change single settings of NPC npc: patch is a JSON merge patch of
        its settings (given fields change, nested objects merge). Returns
        the NPC as stored."""
        return self._call("PATCH", self._npc(npc), body=patch)[1]

    def get_npc(self, npc: str) -> dict[str, Any]:
        return self._call("GET", self._npc(npc))[1]

    def list_npcs(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/v1/npcs")[1]["npcs"])

    def delete_npc(self, npc: str) -> None:
        self._call("DELETE", self._npc(npc))

    # --- the loop: events, tick, actions

    def post_events(self, npc: str, events: Sequence[Event | Mapping[str, Any]]) -> dict[str, int]:
        """Post what NPC npc perceives. Returns accepted and duplicates."""
        return self._call("POST", self._npc(npc, "/events"), body={"events": _events_json(events)})[1]

    def tick(self, npc: str, key: str | None = None) -> TickResult:
        """Run one tick of NPC npc. With a key, a retry with the same key
        (after a timeout, or from a restarted game) returns the stored
        answer and ticks nothing."""
        headers = _key_headers(key)
        return TickResult.from_json(self._call("POST", self._npc(npc, "/tick"), headers=headers)[1])

    def tick_with_events(self, npc: str, events: Sequence[Event | Mapping[str, Any]],
                         key: str | None = None) -> tuple[TickResult, dict[str, int]]:
        """Post events for NPC npc and run its tick, in one request (a round
        of one NPC). Returns the tick and what became of the events
        (accepted and duplicates). Refused events refuse the request whole:
        nothing stored, nothing ticked. With event ids and a key, a retry
        stores nothing twice and returns the committed answer."""
        headers = _key_headers(key)
        body = {"events": _events_json(events)}
        with self._open("POST", self._npc(npc, "/tick"), body=body, headers=headers) as resp:
            result = TickResult.from_json(json.loads(resp.read()))
            posted = {"accepted": int(resp.headers.get("Npcd-Events-Accepted") or 0),
                      "duplicates": int(resp.headers.get("Npcd-Events-Duplicates") or 0)}
        return result, posted

    def tick_many(self, npcs: Sequence[str] | None = None, keys: Mapping[str, str] | None = None,
                  scope: str | None = None,
                  events: Mapping[str, Sequence[Event | Mapping[str, Any]]] | None = None) -> BatchResult:
        """Tick NPCs in parallel; with none, every NPC with pending events
        (of scope, when given). One NPC's failure (an unknown or malformed
        id, a busy NPC) does not stop the others. events, by NPC id (each
        NPC of npcs), are posted before the NPCs tick: a world's events and
        its tick in one request; the result's events say what became of
        them."""
        out = self._call("POST", "/v1/tick", body=_batch_body(npcs, keys, scope, events))[1]
        return BatchResult(
            results=[TickResult.from_json(r) for r in out["results"]],
            errors={e["npc"]: {"code": e["code"], "error": e["error"]} for e in out["errors"]},
            events={npc: dict(v) for npc, v in (out.get("events") or {}).items()},
        )

    def tick_many_stream(self, npcs: Sequence[str] | None = None, keys: Mapping[str, str] | None = None,
                         scope: str | None = None,
                         events: Mapping[str, Sequence[Event | Mapping[str, Any]]] | None = None) -> Iterator[BatchItem]:
        """Like tick_many, but yields each NPC's result (or error) as it
        finishes (NDJSON), so one slow NPC delays no one else's speech; what
        became of the events it carried comes first."""
        with self._open("POST", "/v1/tick", body=_batch_body(npcs, keys, scope, events),
                        headers={"Accept": "application/x-ndjson"}) as resp:
            if not resp.headers.get("Content-Type", "").startswith("application/x-ndjson"):
                # A daemon that does not stream answers the whole batch at once.
                out = json.loads(resp.read())
                for npc, v in (out.get("events") or {}).items():
                    yield BatchItem(events={"npc": npc, **v})
                for r in out["results"]:
                    yield BatchItem(result=TickResult.from_json(r))
                for e in out["errors"]:
                    yield BatchItem(error=dict(e))
                return
            for line in resp:
                if not line.strip():
                    continue
                item = json.loads(line)
                if "result" in item:
                    yield BatchItem(result=TickResult.from_json(item["result"]))
                elif "events" in item:
                    yield BatchItem(events=dict(item["events"]))
                else:
                    yield BatchItem(error=dict(item["error"]))

    def get_tick(self, npc: str, tick: int) -> TickResult:
        """What NPC npc's committed tick answered, again."""
        return TickResult.from_json(self._call("GET", self._npc(npc, f"/ticks/{int(tick)}"))[1])

    def post_tool_results(self, npc: str, results: Mapping[str, str]) -> None:
        """Post the game's results of returns:true calls, by call id."""
        body = {"results": [{"call_id": k, "content": v} for k, v in results.items()]}
        self._call("POST", self._npc(npc, "/tool-results"), body=body)

    def actions(self, after: int = 0, limit: int | None = None, wait: float | None = None,
                npcs: Sequence[str] | None = None, scope: str | None = None) -> Feed:
        """One page of the action feed: committed ticks after cursor after,
        in commit order (of npcs, of scope, when given). With nothing new,
        waits up to wait seconds (at most 30) for a commit."""
        q: dict[str, str] = {"after": str(int(after))}
        if limit:
            q["limit"] = str(int(limit))
        if wait:
            q["wait"] = f"{int(wait * 1000)}ms"
        if npcs:
            q["npc"] = ",".join(npcs)
        if scope:
            q["scope"] = scope
        timeout = self.timeout + (wait or 0)
        out = self._call("GET", "/v1/actions?" + urllib.parse.urlencode(q), timeout=timeout)[1]
        return Feed(ticks=[FeedTick.from_json(t) for t in out["ticks"]], cursor=int(out["cursor"]))

    def stream(self, after: int = 0, npcs: Sequence[str] | None = None,
               scope: str | None = None) -> Iterator[FeedTick]:
        """The action feed as server-sent events: each committed tick after
        cursor after as it commits, until the daemon ends the stream (it
        shuts down). Resume from the last handled tick's cursor. Reads wait
        up to the client's timeout (the daemon sends a keepalive every 15 s)."""
        q: dict[str, str] = {}
        headers = {"Accept": "text/event-stream"}
        if after:
            q["after"] = str(int(after))
            headers["Last-Event-ID"] = str(int(after))
        if npcs:
            q["npc"] = ",".join(npcs)
        if scope:
            q["scope"] = scope
        path = "/v1/actions/stream" + ("?" + urllib.parse.urlencode(q) if q else "")
        with self._open("GET", path, headers=headers) as resp:
            event, data = "", []
            for raw in resp:
                line = raw.decode().rstrip("\r\n")
                if line == "":
                    if data and event in ("tick", ""):
                        yield FeedTick.from_json(json.loads("\n".join(data)))
                    event, data = "", []
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event = value

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/healthz")[1]

    def openapi(self) -> str:
        """The OpenAPI document the daemon serves."""
        with self._open("GET", "/openapi.yaml", headers={"Accept": "application/yaml"}) as resp:
            return resp.read().decode()

    # --- plumbing

    def _npc(self, npc: str, suffix: str = "") -> str:
        return "/v1/npcs/" + urllib.parse.quote(npc, safe="") + suffix

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None,
              headers: Mapping[str, str] | None = None, timeout: float | None = None) -> tuple[int, Any]:
        with self._open(method, path, body=body, headers=headers, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None

    def _open(self, method: str, path: str, body: Mapping[str, Any] | None = None,
              headers: Mapping[str, str] | None = None, timeout: float | None = None) -> Any:
        """The response of a successful call, to use in a with statement."""
        data = None
        req = urllib.request.Request(self.base_url + path, method=method)
        req.add_header("Accept", "application/json")
        if body is not None:
            data = json.dumps(body).encode()
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            return urllib.request.urlopen(req, data=data, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            raw = e.read()
            code, message, field_ = "", raw.decode(errors="replace")[:500], None
            try:
                err = json.loads(raw)["error"]
                code, message = err["code"], err["message"]
                field_ = err.get("field")
                if field_ is None and (m := _FIELD_PREFIX.match(message)):
                    field_ = m.group(1)
            except (ValueError, KeyError, TypeError, AttributeError):
                pass
            retry = e.headers.get("Retry-After")
            raise NpcdError(e.code, code, message, float(retry) if retry and retry.isdigit() else None,
                            field_) from None


def _key_headers(key: str | None) -> dict[str, str] | None:
    """The Idempotency-Key header of a tick; None without a key."""
    return {"Idempotency-Key": key} if key else None


def _events_json(events: Sequence[Event | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events as the API reads them: Event objects or dicts."""
    return [e.to_json() if isinstance(e, Event) else dict(e) for e in events]


def _batch_body(npcs: Sequence[str] | None, keys: Mapping[str, str] | None, scope: str | None,
                events: Mapping[str, Sequence[Event | Mapping[str, Any]]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"npcs": list(npcs or [])}
    if keys:
        body["keys"] = dict(keys)
    if scope:
        body["scope"] = scope
    if events:
        body["events"] = {npc: _events_json(evs) for npc, evs in events.items()}
    return body


class ActionFeed:
    """Follows the action feed from a cursor. Iterating yields every
    committed tick after it, waiting for new ones; cursor is the cursor of
    the last tick yielded. A game that stores it once it has handled that
    tick, and starts again from the stored value, sees every tick at least
    once, each NPC's in order (a tick handled whose cursor was not stored
    yet comes again: npc and tick tell the duplicate).

        feed = ActionFeed(client, cursor=load_cursor())
        for t in feed:
            perform(t)
            save_cursor(feed.cursor)
    """

    def __init__(self, client: Client, cursor: int = 0, wait: float = 20.0, limit: int = 100,
                 npcs: Sequence[str] | None = None, scope: str | None = None) -> None:
        self.client = client
        self.cursor = cursor
        self.wait = wait
        self.limit = limit
        self.npcs = list(npcs) if npcs else None
        self.scope = scope

    def poll(self) -> list[FeedTick]:
        """The next page, waiting up to wait seconds for one; it does not
        move cursor (set it to the last tick's cursor once handled)."""
        return self.client.actions(after=self.cursor, limit=self.limit, wait=self.wait, npcs=self.npcs,
                                   scope=self.scope).ticks

    def __iter__(self) -> Iterator[FeedTick]:
        while True:
            for t in self.poll():
                self.cursor = t.cursor
                yield t
