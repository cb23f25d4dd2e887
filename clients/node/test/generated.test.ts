// src/schema.ts is generated from api/openapi.yaml; this test generates it
// again and fails when the committed file differs (run npm run generate).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

// Compiled, this file runs from dist/test/.
const root = fileURLToPath(new URL("../../", import.meta.url));

test("generated types are up to date with api/openapi.yaml", () => {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts: Record<string, string> };
  const generate = pkg.scripts.generate;
  assert.match(generate, /^openapi-typescript \S+ .*-o src\/schema\.ts$/);
  const dir = mkdtempSync(join(tmpdir(), "npcd-schema-"));
  try {
    const out = join(dir, "schema.ts");
    // The same command as npm run generate, writing elsewhere.
    const args = generate.replace(/^openapi-typescript /, "").replace(/-o src\/schema\.ts$/, "").trim().split(/\s+/);
    const cli = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");
    execFileSync(process.execPath, [cli, ...args, "-o", out], { cwd: root, stdio: "pipe" });
    const want = readFileSync(out, "utf8");
    const got = readFileSync(join(root, "src", "schema.ts"), "utf8");
    assert.ok(want.includes("/v1/actions"), "the generator produced no paths");
    assert.equal(got, want, "src/schema.ts is out of date with api/openapi.yaml: run `npm run generate` in clients/node");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
