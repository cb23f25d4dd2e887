// Tests of the client against a running npcd (see helpers.ts). Tests of API
// additions run when the daemon advertises them in its OpenAPI document.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NpcdError, type BatchItem, type FeedTick } from "../src/index.js";
import { advertised, client, newNPC, say, uid, unless } from "./helpers.js";

const c = client();
const adv = await advertised(c);
const has = {
  patch: adv.has("patch", "/v1/npcs/{npc}"),
  stream: adv.has("get", "/v1/actions/stream"),
  // Keys of the document (a property, a media type), not mere mentions.
  ndjson: /^\s+application\/x-ndjson:/m.test(adv.doc),
  actorId: /^\s+actor_id:/m.test(adv.doc),
  scope: /^\s+scope:/m.test(adv.doc),
  autoTick: /^\s+auto_tick:/m.test(adv.doc),
};

async function rejects(p: Promise<unknown>): Promise<NpcdError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof NpcdError, `want an NpcdError, got ${String(e)}`);
    return e;
  }
  assert.fail("the call succeeded; want an NpcdError");
}

describe("npcd client", () => {
  test("health", async () => {
    assert.equal((await c.health()).status, "ok");
  });

  test("the OpenAPI document lists the routes the client uses", () => {
    for (const [m, p] of [
      ["put", "/v1/npcs/{npc}"],
      ["get", "/v1/npcs"],
      ["post", "/v1/npcs/{npc}/events"],
      ["post", "/v1/npcs/{npc}/tick"],
      ["post", "/v1/tick"],
      ["get", "/v1/npcs/{npc}/ticks/{tick}"],
      ["get", "/v1/actions"],
    ]) {
      assert.ok(adv.has(m, p), `${m} ${p} is not in /openapi.yaml`);
    }
  });

  test("create only keeps edits; get and list", async () => {
    const npc = await newNPC(c);
    const persona = "You are Brom, who lost his hammer.";
    const { npc: stored, created } = await c.putNPC(npc, { name: "Brom", persona });
    assert.equal(created, false);
    assert.equal(stored.persona, persona);
    assert.equal(await c.createNPC(npc, { name: "Brom", persona: "Something else." }), false);
    const e = await rejects(c.putNPC(npc, { name: "Brom", persona: "Else." }, { ifNoneMatch: "*" }));
    assert.deepEqual([e.status, e.code], [412, "exists"]);
    assert.equal((await c.getNPC(npc)).persona, persona);
    assert.ok((await c.listNPCs()).some((n) => n.id === npc && n.name === "Brom"));
    await c.deleteNPC(npc);
    assert.equal((await rejects(c.getNPC(npc))).status, 404);
  });

  test("a tick with a key is idempotent and can be fetched again", async () => {
    const npc = await newNPC(c);
    await say(c, npc, "Good morning, smith!");
    const first = await c.tick(npc, { key: "turn-1" });
    assert.equal(first.idle, false);
    assert.equal(first.tick, 1);
    assert.equal(first.actions[0].tool, "say");
    assert.equal(typeof first.actions[0].args.text, "string");
    assert.ok(first.actions[0].args.text);
    await say(c, npc, "Can you mend my sword?");
    assert.deepEqual(await c.tick(npc, { key: "turn-1" }), first);
    assert.deepEqual(await c.getTick(npc, 1), first);
    assert.equal((await c.tick(npc, { key: "turn-2" })).tick, 2);
  });

  test("errors carry status, code and field", async () => {
    const npc = await newNPC(c);
    let e = await rejects(c.getTick(npc, 99));
    assert.deepEqual([e.status, e.code], [404, "not_found"]);
    e = await rejects(c.tick(npc, { key: "has space" }));
    assert.deepEqual([e.status, e.code, e.field], [400, "bad_request", "Idempotency-Key"]);
    e = await rejects(c.postEvents(npc, [{ kind: "say", actor: 'Bob: "hi"', text: "x" }]));
    assert.equal(e.status, 400);
    assert.equal(e.field, "events[0].actor");
    e = await rejects(c.postEvents(npc, [{ kind: "say", actor: "Brom", text: "I am me." }]));
    assert.deepEqual([e.status, e.code, e.field], [422, "invalid_value", "events[0].actor"]);
    assert.ok(e.message.includes("HTTP 422"));
  });

  test("a batch tick: a bad id fails alone; keys make it idempotent", async () => {
    const npc = await newNPC(c);
    await say(c, npc, "Hello!");
    const got = await c.tickMany({ npcs: [npc, "Not An Id", "js-ghost"], keys: { [npc]: "b-1" } });
    assert.deepEqual(got.results.map((r) => r.npc), [npc]);
    const codes = Object.fromEntries(got.errors.map((e) => [e.npc, e.code]));
    assert.deepEqual(codes, { "Not An Id": "bad_request", "js-ghost": "not_found" });
    const again = await c.tickMany({ npcs: [npc], keys: { [npc]: "b-1" } });
    assert.deepEqual(again.results, got.results);
  });

  test("a batch tick posts the events it carries before its NPCs tick", async () => {
    const a = await newNPC(c, "Brom");
    const b = await newNPC(c, "Mira");
    const req = {
      npcs: [a, b],
      keys: { [a]: "w-1" },
      events: {
        [a]: [{ id: "js-e1", kind: "say", actor: "alice", text: "Hello, smith!" }],
        [b]: [{ kind: "say", actor: "alice", text: "Bread?", at: "yesterday" }],
      },
    };
    const got = await c.tickMany(req);
    assert.deepEqual(got.events?.[a], { accepted: 1, duplicates: 0 });
    assert.equal(got.events?.[b].code, "bad_request");
    const ticked = Object.fromEntries(got.results.map((r) => [r.npc, r.events]));
    assert.deepEqual(ticked, { [a]: 1, [b]: 0 });
    // Retried, the event is a duplicate and the keyed tick is answered again.
    const again = await c.tickMany(req);
    assert.deepEqual(again.events?.[a], { accepted: 0, duplicates: 1 });
    assert.equal(again.results.find((r) => r.npc === a)?.tick, got.results.find((r) => r.npc === a)?.tick);
    const lines: BatchItem[] = [];
    for await (const it of c.tickManyStream({ npcs: [a], events: { [a]: [{ kind: "say", actor: "alice", text: "Sword?" }] } })) lines.push(it);
    assert.deepEqual(lines[0].events, { npc: a, accepted: 1, duplicates: 0 });
    assert.equal(lines[1].result?.events, 1);
  });

  test("a tick posts the events it carries first", async () => {
    const npc = await newNPC(c, "Brom");
    const events = [{ id: "js-t1", kind: "say", actor: "alice", text: "Hello, smith!" }];
    const first = await c.tickWithEvents(npc, events, { key: "t-1" });
    assert.deepEqual([first.result.tick, first.result.events, first.accepted, first.duplicates], [1, 1, 1, 0]);
    const again = await c.tickWithEvents(npc, events, { key: "t-1" });
    assert.deepEqual([again.result.tick, again.accepted, again.duplicates], [1, 0, 1]);
    await assert.rejects(c.tickWithEvents(npc, [{ kind: "", actor: "alice", text: "Hm?" }]), (e: NpcdError) => e.status === 400);
  });

  test("a streamed batch tick yields every NPC's result or error", async () => {
    const a = await newNPC(c, "Brom");
    const b = await newNPC(c, "Mira");
    await say(c, a, "Hello, smith!");
    await say(c, b, "Hello, baker!");
    const items: BatchItem[] = [];
    for await (const it of c.tickManyStream({ npcs: [a, b, "Not An Id", "js-ghost"] })) items.push(it);
    const ticked = items.flatMap((i) => (i.result ? [i.result.npc] : [])).sort();
    assert.deepEqual(ticked, [a, b].sort());
    for (const i of items) if (i.result) assert.equal(i.result.actions[0].tool, "say");
    const failed = Object.fromEntries(items.flatMap((i) => (i.error ? [[i.error.npc, i.error.code]] : [])));
    assert.deepEqual(failed, { "Not An Id": "bad_request", "js-ghost": "not_found" });
  });

  test("the feed resumes from a stored cursor", async () => {
    const a = await newNPC(c, "Brom");
    const b = await newNPC(c, "Mira");
    for (let i = 0; i < 3; i++) {
      await say(c, a, `Round ${i}, smith?`);
      await say(c, b, `Round ${i}, baker?`);
      await c.tickMany({ npcs: [a, b] });
    }
    const seen: Record<string, number[]> = { [a]: [], [b]: [] };
    // A game handles two ticks, stores its cursor and "restarts" (a new
    // client and feed from the stored cursor), until it is done.
    let stored = 0;
    for (let round = 0; round < 10; round++) {
      const feed = client().follow({ cursor: stored, waitMs: 200, limit: 2, npcs: [a, b] });
      const ticks = await feed.poll();
      if (ticks.length === 0) break;
      for (const t of ticks) {
        assert.ok(t.cursor > stored);
        assert.ok(t.actions.length > 0);
        seen[t.npc].push(t.tick);
        stored = t.cursor;
      }
    }
    assert.deepEqual(seen, { [a]: [1, 2, 3], [b]: [1, 2, 3] });
  });

  test("follow waits for new ticks and saves the cursor of each handled tick", async () => {
    const npc = await newNPC(c);
    const start = (await c.actions({ npcs: [npc] })).cursor;
    const saved: number[] = [];
    const feed = c.follow({ cursor: start, waitMs: 10_000, npcs: [npc], save: (cur) => void saved.push(cur) });
    setTimeout(async () => {
      for (const text of ["Anyone here?", "Hello?"]) {
        await say(c, npc, text);
        await c.tick(npc);
      }
    }, 100);
    const got: FeedTick[] = [];
    for await (const t of feed) {
      got.push(t);
      assert.equal(feed.cursor, t.cursor);
      if (got.length === 2) break;
    }
    assert.deepEqual(got.map((t) => [t.npc, t.tick]), [[npc, 1], [npc, 2]]);
    // The first was handled when the loop asked for the second; the loop
    // broke out of the second, which is saved by the game itself.
    assert.deepEqual(saved, [got[0].cursor]);
    assert.deepEqual(got[0].actions, (await c.getTick(npc, 1)).actions);
  });

  test("PATCH changes single settings", { skip: unless(has.patch, "PATCH /v1/npcs/{npc}") }, async () => {
    const npc = await newNPC(c);
    const before = await c.getNPC(npc);
    const after = await c.patchNPC(npc, { persona: "You are Brom, who found his hammer." });
    assert.equal(after.persona, "You are Brom, who found his hammer.");
    assert.equal(after.name, before.name);
    assert.equal(after.context_window, before.context_window);
    assert.deepEqual(await c.getNPC(npc), after);
    const e = await rejects(c.patchNPC(`js-ghost-${uid()}`, { persona: "x" }));
    assert.deepEqual([e.status, e.code], [404, "not_found"]);
  });

  test("scope: a batch tick and the feed of one scope", { skip: unless(has.scope && has.patch, "scope") }, async () => {
    const s1 = `g-${uid()}`;
    const s2 = `g-${uid()}`;
    const a = await newNPC(c, "Brom", { scope: s1 });
    const b = await newNPC(c, "Mira", { scope: s1 });
    const other = await newNPC(c, "Odo", { scope: s2 });
    assert.equal((await c.getNPC(a)).scope, s1);
    for (const n of [a, b, other]) await say(c, n, "Hello there!");
    const got = await c.tickMany({ scope: s1 });
    assert.deepEqual(got.results.map((r) => r.npc).sort(), [a, b].sort());
    assert.deepEqual(got.errors, []);
    // other was not ticked: its events are still pending.
    assert.equal((await c.tick(other)).tick, 1);
    const feed = await c.actions({ scope: s1 });
    assert.deepEqual([...new Set(feed.ticks.map((t) => t.npc))].sort(), [a, b].sort());
    // A malformed value is refused naming the field (400, as PUT does, or 422).
    const e = await rejects(c.patchNPC(a, { scope: "Not A Scope" }));
    assert.ok([400, 422].includes(e.status), `status ${e.status}`);
    assert.equal(e.field, "scope");
    assert.equal((await c.getNPC(a)).scope, s1);
  });

  test("events with actor_id and actor_name", { skip: unless(has.actorId, "actor_id") }, async () => {
    const npc = await newNPC(c);
    const got = await c.postEvents(npc, [
      { kind: "say", actor_id: "char:12", actor_name: "Alice", text: "I am Alice.", id: uid() },
      { kind: "say", actor_id: "char:12", actor_name: "Alice the Bold", text: "Renamed.", id: uid() },
    ]);
    assert.equal(got.accepted, 2);
    assert.equal((await c.tick(npc)).idle, false);
    const e = await rejects(c.postEvents(npc, [{ kind: "say", actor_id: "has space", actor_name: "Bob", text: "x" }]));
    assert.equal(e.status === 400 || e.status === 422, true, `status ${e.status}`);
    assert.equal(e.field, "events[0].actor_id");
  });

  test("auto-tick delivers actions through the feed", { skip: unless(has.autoTick && has.patch, "auto_tick") }, async () => {
    const npc = await newNPC(c);
    await c.patchNPC(npc, { auto_tick: { enabled: true, debounce_ms: 20, max_wait_ms: 200 } });
    const start = (await c.actions({ npcs: [npc] })).cursor;
    await say(c, npc, "Is anyone at the forge?");
    const feed = c.follow({ cursor: start, waitMs: 10_000, npcs: [npc] });
    for await (const t of feed) {
      assert.deepEqual([t.npc, t.tick], [npc, 1]);
      assert.equal(t.actions[0].tool, "say");
      break;
    }
  });

  test("the feed as server-sent events, resumed from a cursor", { skip: unless(has.stream, "GET /v1/actions/stream") }, async () => {
    const npc = await newNPC(c);
    const start = (await c.actions({ npcs: [npc] })).cursor;
    const ac = new AbortController();
    const got: FeedTick[] = [];
    const reading = (async () => {
      try {
        for await (const t of c.stream({ after: start, npcs: [npc], signal: ac.signal })) {
          got.push(t);
          if (got.length === 2) break;
        }
      } finally {
        ac.abort();
      }
    })();
    for (const text of ["Anyone here?", "Hello?", "Still there?"]) {
      await say(c, npc, text);
      await c.tick(npc);
    }
    await reading;
    assert.deepEqual(got.map((t) => [t.npc, t.tick]), [[npc, 1], [npc, 2]]);
    assert.deepEqual(got[0].actions, (await c.getTick(npc, 1)).actions);
    // A restarted game resumes after the last cursor it handled.
    const ac2 = new AbortController();
    let last = 0;
    for await (const t of c.stream({ after: got[1].cursor, npcs: [npc], signal: ac2.signal })) {
      assert.deepEqual([t.npc, t.tick], [npc, 3]);
      last = t.cursor;
      ac2.abort();
      break;
    }
    assert.ok(last > 0, "the resumed stream yielded tick 3");
    // Aborting a stream that waits for the next tick ends it, not an error.
    const ac3 = new AbortController();
    const next = c.stream({ after: last, npcs: [npc], signal: ac3.signal }).next();
    setTimeout(() => ac3.abort(), 50);
    assert.deepEqual(await next, { done: true, value: undefined });
  });

  test("a batch tick streams NDJSON when asked", { skip: unless(has.ndjson, "application/x-ndjson") }, async () => {
    const npc = await newNPC(c);
    await say(c, npc, "Hello!");
    const res = await fetch(`${c.baseUrl}/v1/tick`, {
      method: "POST",
      headers: {
        Accept: "application/x-ndjson",
        "Content-Type": "application/json",
        ...(c.token ? { Authorization: `Bearer ${c.token}` } : {}),
      },
      body: JSON.stringify({ npcs: [npc, "Not An Id"] }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("Content-Type") ?? "", /^application\/x-ndjson/);
    const lines = (await res.text()).split("\n").filter((l) => l !== "");
    const items = lines.map((l) => JSON.parse(l) as BatchItem);
    assert.equal(items.length, 2);
    assert.ok(items.some((i) => i.result?.npc === npc));
    assert.ok(items.some((i) => i.error?.npc === "Not An Id" && i.error.code === "bad_request"));
  });
});
