// A client of the npcd HTTP API for Node 20 or later: NPCs, events, ticks
// (one, many, streamed), committed ticks fetched again, and the action feed
// (long poll, a cursor-keeping iterator, server-sent events). It uses
// Node's global fetch and nothing else at run time. The wire types come
// from src/schema.ts, generated from api/openapi.yaml (npm run generate).

import type { components } from "./schema.js";

export type { components, paths } from "./schema.js";

type Schemas = components["schemas"];

/** An NPC's auto-tick setting: tick it on its own once events arrived. */
export interface AutoTick {
  enabled?: boolean;
  /** tick once the NPC has been quiet this long (1..60000, default 50) */
  debounce_ms?: number;
  /** and at the latest this long after the first pending event (default 500) */
  max_wait_ms?: number;
}

/** What PUT takes: an NPC's settings. */
export type NPCSettings = Schemas["NPCSettings"] & {
  /** a game, shard or zone (^[a-z0-9_-]{1,64}$); empty for none */
  scope?: string;
  auto_tick?: AutoTick;
};

/** What PATCH takes: a JSON merge patch of NPCSettings (given fields change, nested objects merge). */
export type NPCPatch = DeepPartial<NPCSettings>;

/** An NPC as stored. */
export type NPC = Schemas["NPC"] & { scope?: string; auto_tick?: AutoTick };

/**
 * One thing an NPC perceives. actor_id is the actor's stable identity (what
 * the NPC's profile of it keys on, ^[A-Za-z0-9_.:@-]{1,128}$), actor_name how
 * it is shown; actor alone is both.
 */
export type Event = Schemas["Event"] & { actor_id?: string; actor_name?: string };

export type EventsAccepted = Schemas["EventsAccepted"];

/** A game tool call: perform tool with args. */
export type Action = Omit<Schemas["Action"], "args"> & { args: Record<string, unknown> };

/** What one tick did. */
export type TickResult = Omit<Schemas["TickResult"], "actions"> & { actions: Action[] };

/** One NPC of a batch that did not tick. */
export type BatchError = Schemas["BatchError"];

/** What became of one NPC's events in a batch tick: stored, seen before, or refused (code and error). */
export type BatchEvents = Schemas["BatchEvents"];

/** BatchEvents with its NPC: a line of a streamed batch tick. */
export type NPCEvents = Schemas["NPCEvents"];

export interface BatchTickResponse {
  results: TickResult[];
  errors: BatchError[];
  /** what became of the events the request carried, by NPC id */
  events?: Record<string, BatchEvents>;
}

/**
 * One line of a streamed batch tick: an NPC that ticked, one that failed,
 * or (first) what became of the events the request carried for an NPC.
 */
export type BatchItem =
  | { result: TickResult; error?: undefined; events?: undefined }
  | { error: BatchError; result?: undefined; events?: undefined }
  | { events: NPCEvents; result?: undefined; error?: undefined };

/** One committed tick in the action feed; cursor grows in commit order. */
export type FeedTick = Omit<Schemas["FeedTick"], "actions"> & { actions: Action[] };

/** A page of the action feed: pass cursor as after next time. */
export interface Feed {
  ticks: FeedTick[];
  cursor: number;
}

export type ToolResult = Schemas["ToolResult"];
export type Health = Schemas["Health"];

type DeepPartial<T> = T extends (infer U)[]
  ? U[]
  : T extends object
    ? { [K in keyof T]?: DeepPartial<T[K]> | null }
    : T;

/**
 * An error answer of npcd: its HTTP status, its code ("not_found", "exists",
 * "invalid_value", "too_busy", ...), the field it names when it names one
 * ("events[0].actor", "Idempotency-Key"), its message, safe to show, and
 * the wait npcd asked for (429, 503) in seconds.
 */
export class NpcdError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | undefined;
  readonly retryAfter: number | undefined;
  readonly detail: string;

  constructor(status: number, code: string, message: string, field?: string, retryAfter?: number) {
    super(`npcd: HTTP ${status} ${code}: ${message}`);
    this.name = "NpcdError";
    this.status = status;
    this.code = code;
    this.detail = message;
    this.field = field;
    this.retryAfter = retryAfter;
  }
}

// A message that names its field starts with it: "events[0].actor: ...".
const fieldPrefix = /^([A-Za-z_{][A-Za-z0-9_.\-[\]{}]*): /;

export interface ClientOptions {
  /** the bearer token of a daemon started with NPCD_API_TOKEN */
  token?: string;
  /** per call, in milliseconds; above npcd's default tick timeout (2 minutes) by default */
  timeoutMs?: number;
}

export interface ActionsQuery {
  /** the cursor of the last tick handled; 0 for the start */
  after?: number;
  /** at most this many ticks (1..1000) */
  limit?: number;
  /** with nothing new, wait up to this long for a commit (at most 30000) */
  waitMs?: number;
  /** only these NPCs */
  npcs?: string[];
  /** only NPCs of this scope */
  scope?: string;
  signal?: AbortSignal;
}

export interface FollowOptions extends Omit<ActionsQuery, "after"> {
  /** the stored cursor to resume from; 0 for the start */
  cursor?: number;
  /**
   * Called with a tick's cursor once the game has handled it (when the loop
   * asks for the next tick): store it there, and start from it next time.
   */
  save?: (cursor: number) => void | Promise<void>;
}

export interface StreamOptions {
  /** the stored cursor to resume from (sent as Last-Event-ID) */
  after?: number;
  npcs?: string[];
  scope?: string;
  signal?: AbortSignal;
}

export interface BatchTickRequest {
  /** the NPCs to tick; none: every NPC with pending events (of scope, if given) */
  npcs?: string[];
  /** an idempotency key per NPC id */
  keys?: Record<string, string>;
  scope?: string;
  /** events to post for NPCs of npcs before they tick, by NPC id: a world's events and its tick in one request */
  events?: Record<string, Event[]>;
}

export const DEFAULT_URL = "http://127.0.0.1:8740";
const DEFAULT_TIMEOUT_MS = 180_000;

/** A client of one npcd daemon. */
export class Client {
  readonly baseUrl: string;
  readonly token: string | undefined;
  readonly timeoutMs: number;

  constructor(baseUrl: string = DEFAULT_URL, opts: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = opts.token;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  // --- NPCs

  /**
   * Create NPC id or replace its settings (its memory is kept). With
   * ifNoneMatch "*", create only: an existing NPC is left as it is and the
   * call fails with NpcdError 412, code "exists".
   */
  async putNPC(id: string, settings: NPCSettings, opts: { ifNoneMatch?: "*" } = {}): Promise<{ npc: NPC; created: boolean }> {
    const headers: Record<string, string> = opts.ifNoneMatch ? { "If-None-Match": opts.ifNoneMatch } : {};
    const { status, body } = await this.call<NPC>("PUT", npcPath(id), { body: settings, headers });
    return { npc: body, created: status === 201 };
  }

  /**
   * Create NPC id only if it does not exist; returns whether it was created.
   * Register NPCs with it at every start of the game, so edits made since
   * survive.
   */
  async createNPC(id: string, settings: NPCSettings): Promise<boolean> {
    try {
      await this.putNPC(id, settings, { ifNoneMatch: "*" });
      return true;
    } catch (e) {
      if (e instanceof NpcdError && e.status === 412) return false;
      throw e;
    }
  }

  /** Change single settings of NPC id (a JSON merge patch); returns the NPC as stored. */
  async patchNPC(id: string, patch: NPCPatch): Promise<NPC> {
    return (await this.call<NPC>("PATCH", npcPath(id), { body: patch })).body;
  }

  async getNPC(id: string): Promise<NPC> {
    return (await this.call<NPC>("GET", npcPath(id))).body;
  }

  async listNPCs(): Promise<NPC[]> {
    return (await this.call<{ npcs: NPC[] }>("GET", "/v1/npcs")).body.npcs;
  }

  async deleteNPC(id: string): Promise<void> {
    await this.call("DELETE", npcPath(id));
  }

  // --- the loop: events, ticks, actions

  /** Post what NPC id perceives; an event's id makes a retried post a duplicate. */
  async postEvents(id: string, events: Event[]): Promise<EventsAccepted> {
    return (await this.call<EventsAccepted>("POST", npcPath(id, "/events"), { body: { events } })).body;
  }

  /**
   * Run one tick of NPC id. With a key, a retry with the same key (after a
   * timeout, or from a restarted game) returns the committed answer and
   * ticks nothing.
   */
  async tick(id: string, opts: { key?: string; signal?: AbortSignal } = {}): Promise<TickResult> {
    const headers = keyHeaders(opts.key);
    return (await this.call<TickResult>("POST", npcPath(id, "/tick"), { headers, signal: opts.signal })).body;
  }

  /**
   * Post events for NPC id and run its tick, in one request (a round of one
   * NPC). Refused events refuse the request whole: nothing stored, nothing
   * ticked. With event ids and a key, a retry stores nothing twice and
   * returns the committed answer.
   */
  async tickWithEvents(
    id: string,
    events: Event[],
    opts: { key?: string; signal?: AbortSignal } = {},
  ): Promise<{ result: TickResult; accepted: number; duplicates: number }> {
    const headers = keyHeaders(opts.key);
    const res = await this.send("POST", npcPath(id, "/tick"), { body: { events }, headers, signal: opts.signal });
    const result = (await res.json()) as TickResult;
    const count = (name: string) => Number(res.headers.get(name) ?? 0);
    return { result, accepted: count("Npcd-Events-Accepted"), duplicates: count("Npcd-Events-Duplicates") };
  }

  /**
   * Tick NPCs in parallel and answer once all are done; one NPC's failure
   * (a malformed or unknown id, a busy NPC) is in errors and the rest tick.
   */
  async tickMany(req: BatchTickRequest = {}): Promise<BatchTickResponse> {
    return (await this.call<BatchTickResponse>("POST", "/v1/tick", { body: batchBody(req) })).body;
  }

  /**
   * Tick NPCs in parallel and yield each NPC's result (or error) as it
   * finishes (NDJSON), so one slow NPC delays no one else's speech.
   */
  async *tickManyStream(req: BatchTickRequest = {}, signal?: AbortSignal): AsyncGenerator<BatchItem> {
    const res = await this.send("POST", "/v1/tick", {
      body: batchBody(req),
      headers: { Accept: "application/x-ndjson" },
      signal,
      stream: true,
    });
    const type = res.headers.get("Content-Type") ?? "";
    if (!type.startsWith("application/x-ndjson")) {
      // A daemon that does not stream answers the whole batch at once.
      const all = (await res.json()) as BatchTickResponse;
      for (const [npc, ev] of Object.entries(all.events ?? {})) yield { events: { npc, ...ev } };
      for (const result of all.results) yield { result };
      for (const error of all.errors) yield { error };
      return;
    }
    for await (const line of lines(res)) {
      if (line.trim() !== "") yield JSON.parse(line) as BatchItem;
    }
  }

  /** What NPC id's committed tick n answered, again. */
  async getTick(id: string, n: number): Promise<TickResult> {
    return (await this.call<TickResult>("GET", npcPath(id, `/ticks/${Math.trunc(n)}`))).body;
  }

  /** Post the game's results of returns:true tool calls. */
  async postToolResults(id: string, results: ToolResult[]): Promise<void> {
    await this.call("POST", npcPath(id, "/tool-results"), { body: { results } });
  }

  // --- the action feed

  /**
   * One page of the action feed: committed ticks after the cursor, in
   * commit order; with nothing new, waits up to waitMs for one.
   */
  async actions(q: ActionsQuery = {}): Promise<Feed> {
    const p = new URLSearchParams({ after: String(Math.trunc(q.after ?? 0)) });
    if (q.limit) p.set("limit", String(q.limit));
    if (q.waitMs) p.set("wait", `${Math.trunc(q.waitMs)}ms`);
    if (q.npcs?.length) p.set("npc", q.npcs.join(","));
    if (q.scope) p.set("scope", q.scope);
    const timeoutMs = this.timeoutMs + (q.waitMs ?? 0);
    return (await this.call<Feed>("GET", `/v1/actions?${p}`, { signal: q.signal, timeoutMs })).body;
  }

  /**
   * Follow the action feed from a stored cursor: every committed tick after
   * it, waiting for new ones, forever (until signal aborts or the loop
   * breaks). Every tick comes at least once, each NPC's in order; a tick
   * handled whose cursor was not stored yet comes again after a restart
   * (npc and tick tell the duplicate).
   */
  follow(opts: FollowOptions = {}): ActionFeed {
    return new ActionFeed(this, opts);
  }

  /**
   * The action feed as server-sent events: each committed tick after the
   * cursor as it commits, until the daemon ends the stream (it shuts down)
   * or signal aborts. Resume from the last tick's cursor.
   */
  async *stream(opts: StreamOptions = {}): AsyncGenerator<FeedTick> {
    const p = new URLSearchParams();
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (opts.after) {
      p.set("after", String(Math.trunc(opts.after)));
      headers["Last-Event-ID"] = String(Math.trunc(opts.after));
    }
    if (opts.npcs?.length) p.set("npc", opts.npcs.join(","));
    if (opts.scope) p.set("scope", opts.scope);
    const qs = p.toString() ? `?${p}` : "";
    try {
      const res = await this.send("GET", `/v1/actions/stream${qs}`, { headers, signal: opts.signal, stream: true });
      for await (const ev of sseEvents(res)) {
        if (ev.event === "tick" || ev.event === "message") yield JSON.parse(ev.data) as FeedTick;
      }
    } catch (err) {
      // The caller's own abort ends the stream; it is not a failure.
      if (opts.signal?.aborted) return;
      throw err;
    }
  }

  // --- the daemon

  async health(): Promise<Health> {
    return (await this.call<Health>("GET", "/healthz")).body;
  }

  /** The OpenAPI document the daemon serves. */
  async openapi(): Promise<string> {
    const res = await this.send("GET", "/openapi.yaml", { headers: { Accept: "application/yaml" } });
    return res.text();
  }

  // --- plumbing

  private async call<T>(method: string, path: string, opts: SendOptions = {}): Promise<{ status: number; body: T }> {
    const res = await this.send(method, path, opts);
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  }

  private async send(method: string, path: string, opts: SendOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { Accept: "application/json", ...opts.headers };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers["Content-Type"] = "application/json";
    }
    const signals: AbortSignal[] = [];
    if (!opts.stream) signals.push(AbortSignal.timeout(opts.timeoutMs ?? this.timeoutMs));
    if (opts.signal) signals.push(opts.signal);
    const signal = signals.length ? AbortSignal.any(signals) : undefined;
    const res = await fetch(this.baseUrl + path, { method, headers, body, signal });
    if (!res.ok) throw await errorOf(res);
    return res;
  }
}

interface SendOptions {
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** a long-lived answer: no timeout but signal */
  stream?: boolean;
}

/**
 * Follows the action feed (see Client.follow). cursor is the cursor of the
 * last tick yielded.
 *
 *     const feed = npcd.follow({ cursor: await loadCursor(), save: saveCursor });
 *     for await (const t of feed) perform(t);
 */
export class ActionFeed implements AsyncIterable<FeedTick> {
  cursor: number;
  private readonly client: Client;
  private readonly opts: FollowOptions;

  constructor(client: Client, opts: FollowOptions = {}) {
    this.client = client;
    this.opts = opts;
    this.cursor = opts.cursor ?? 0;
  }

  /** The next page after cursor, waiting for one; it does not move cursor. */
  async poll(): Promise<FeedTick[]> {
    const { save: _save, cursor: _cursor, ...q } = this.opts;
    const feed = await this.client.actions({ ...q, after: this.cursor, waitMs: this.opts.waitMs ?? 20_000 });
    return feed.ticks;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<FeedTick> {
    for (;;) {
      if (this.opts.signal?.aborted) return;
      for (const t of await this.poll()) {
        this.cursor = t.cursor;
        yield t;
        // The loop asked for the next tick: this one is handled.
        await this.opts.save?.(t.cursor);
      }
    }
  }
}

/** The headers of a tick sent with key: its Idempotency-Key, when given. */
function keyHeaders(key?: string): Record<string, string> {
  return key ? { "Idempotency-Key": key } : {};
}

function npcPath(id: string, suffix = ""): string {
  return `/v1/npcs/${encodeURIComponent(id)}${suffix}`;
}

function batchBody(req: BatchTickRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { npcs: req.npcs ?? [] };
  if (req.keys && Object.keys(req.keys).length) body.keys = req.keys;
  if (req.scope) body.scope = req.scope;
  if (req.events && Object.keys(req.events).length) body.events = req.events;
  return body;
}

async function errorOf(res: Response): Promise<NpcdError> {
  const text = await res.text().catch(() => "");
  let code = "";
  let message = text.slice(0, 500);
  let field: string | undefined;
  try {
    const err = (JSON.parse(text) as { error?: { code?: string; message?: string; field?: string } }).error;
    if (err && typeof err.code === "string" && typeof err.message === "string") {
      code = err.code;
      message = err.message;
      field = err.field ?? fieldPrefix.exec(message)?.[1];
    }
  } catch {
    // not npcd's error body (a proxy's page): keep the text
  }
  const ra = res.headers.get("Retry-After");
  const retryAfter = ra && /^\d+$/.test(ra) ? Number(ra) : undefined;
  return new NpcdError(res.status, code, message, field, retryAfter);
}

/**
 * The lines of a response body as they arrive. A reader that stops early
 * (the loop breaks, or its signal aborted the request) closes the body
 * without raising: cancelling a body the abort already failed would
 * otherwise reject with the abort's error.
 */
async function* lines(res: Response): AsyncGenerator<string> {
  if (!res.body) return;
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let done = false;
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      buf += dec.decode(r.value, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        yield buf.slice(0, i).replace(/\r$/, "");
        buf = buf.slice(i + 1);
      }
    }
    done = true;
  } finally {
    if (!done) reader.cancel().catch(() => {});
    else reader.releaseLock();
  }
  buf += dec.decode();
  if (buf !== "") yield buf;
}

/** One server-sent event. */
export interface SSEEvent {
  id?: string;
  event: string;
  data: string;
}

/** The events of a text/event-stream body (comments such as keepalives are skipped). */
async function* sseEvents(res: Response): AsyncGenerator<SSEEvent> {
  let id: string | undefined;
  let event = "";
  let data: string[] = [];
  for await (const line of lines(res)) {
    if (line === "") {
      if (data.length) yield { id, event: event || "message", data: data.join("\n") };
      event = "";
      data = [];
      continue;
    }
    if (line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const name = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
    if (name === "data") data.push(value);
    else if (name === "event") event = value;
    else if (name === "id") id = value;
  }
}
