// Helpers of the client's tests, which run against a running npcd named by
// NPCD_URL (and NPCD_API_TOKEN if it needs one). Without NPCD_URL they
// fail: they test the client with the real daemon, never with a stand-in.

import { randomUUID } from "node:crypto";
import { Client } from "../src/index.js";

export function client(): Client {
  const url = process.env.NPCD_URL;
  if (!url) {
    throw new Error("NPCD_URL is not set: run these tests against a running npcd (go test ./cmd/npcd -run TestNodeClient does)");
  }
  return new Client(url, { token: process.env.NPCD_API_TOKEN || undefined, timeoutMs: 60_000 });
}

export function uid(): string {
  return randomUUID().replaceAll("-", "").slice(0, 12);
}

/** A fresh NPC of its own for each test, so tests share the daemon. */
export async function newNPC(c: Client, name = "Brom", extra: Record<string, unknown> = {}): Promise<string> {
  const id = `js-${uid()}`;
  const created = await c.createNPC(id, { name, persona: `You are ${name}, the gruff village blacksmith of Oakvale.`, ...extra });
  if (!created) throw new Error(`npc ${id} existed`);
  return id;
}

export async function say(c: Client, npc: string, text: string): Promise<void> {
  const got = await c.postEvents(npc, [{ kind: "say", actor: "Alice", text, id: uid() }]);
  if (got.accepted !== 1) throw new Error(`event not accepted: ${JSON.stringify(got)}`);
}

/**
 * What the daemon's OpenAPI document advertises, so the tests of API
 * additions run exactly when the daemon has them: the document is the one
 * the daemon embeds, and a test of the daemon keeps it and its routes in
 * step.
 */
export interface Advertised {
  /** method (lower case) by path */
  methods: Map<string, Set<string>>;
  doc: string;
  has(method: string, path: string): boolean;
}

export async function advertised(c: Client): Promise<Advertised> {
  const doc = await c.openapi();
  const methods = new Map<string, Set<string>>();
  let inPaths = false;
  let current: Set<string> | undefined;
  for (const line of doc.split("\n")) {
    if (/^\S/.test(line)) {
      inPaths = line.startsWith("paths:");
      current = undefined;
      continue;
    }
    if (!inPaths) continue;
    const p = /^ {2}(\/\S*):\s*$/.exec(line);
    if (p) {
      current = new Set();
      methods.set(p[1], current);
      continue;
    }
    const m = /^ {4}(get|put|post|patch|delete):\s*$/.exec(line);
    if (m && current) current.add(m[1]);
  }
  return { methods, doc, has: (method, path) => methods.get(path)?.has(method.toLowerCase()) ?? false };
}

/** A skip reason for a test of an addition the daemon does not advertise, else false. */
export function unless(cond: boolean, what: string): string | false {
  return cond ? false : `the daemon does not advertise ${what} yet`;
}
