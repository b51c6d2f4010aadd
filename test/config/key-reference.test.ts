// Each config key is declared once, in config/schema.ts (with the backends' own keys from
// target/backend/registry.ts); the example config and docs/operations.md are its reference
// for operators. This test walks the schema and fails when either leaves a key out, or the
// example shows a key the schema does not have: the copies cannot drift apart silently.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SchemaObject } from 'ajv';
import { configSchema } from '../../config/schema.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const example = readFileSync(join(ROOT, 'config', 'rblkd.example.yaml'), 'utf8');
const operations = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');

/** Every key path of the schema, as dotted names ('volumes.qos.initiators.iops'). */
function keyPaths(s: SchemaObject, prefix: string[] = []): string[][] {
  const out: string[][] = [];
  const props = (s.properties ?? (s.items as SchemaObject | undefined)?.properties) as Record<string, SchemaObject> | undefined;
  if (props === undefined) return out;
  for (const [k, v] of Object.entries(props)) {
    out.push([...prefix, k]);
    out.push(...keyPaths(v, [...prefix, k]));
  }
  return out;
}

const paths = keyPaths(configSchema);
const names = new Set(paths.map((p) => p[p.length - 1]));
/** Keys the example writes or explains, set or commented out: `key:` at the start of a line, after `#` and `-`. */
const exampleKeys = new Set([...example.matchAll(/^[ \t]*(?:#[ \t]*)?(?:-[ \t]+)?([a-z][a-z0-9_]*):(?:[ \t]|$)/gm)].map((m) => m[1]));

test('the schema is walked: its key paths include the ones this test is about', (t) => {
  const dotted = paths.map((p) => p.join('.'));
  for (const k of ['target_name', 'listeners.port', 'volumes.qos.initiators.iops', 'volumes.rbd.fast_path', 'limits.queue_depth', 'fast_path']) t.true(dotted.includes(k), k);
});

test('the example config shows or explains every key the schema has', (t) => {
  const missing = [...names].filter((n) => !exampleKeys.has(n));
  t.deepEqual(missing, [], `keys of config/schema.ts that config/rblkd.example.yaml never mentions: ${missing.join(', ')}`);
});

test('every key the example writes or explains is one the schema has', (t) => {
  // Words before a colon in the example's prose comments are not keys: only those written like a key are read.
  const unknown = [...exampleKeys].filter((k) => !names.has(k) && /_|^[a-z]+$/.test(k) && example.includes(`${k}: `) && !PROSE.has(k));
  t.deepEqual(unknown, [], `keys in config/rblkd.example.yaml that config/schema.ts does not have: ${unknown.join(', ')}`);
});

test('docs/operations.md names every key the schema has', (t) => {
  const missing = [...names].filter((n) => !new RegExp(`\`(?:[a-z_]+\\.)*${n}\\b|\\b${n}:`).test(operations));
  t.deepEqual(missing, [], `keys of config/schema.ts that docs/operations.md never names: ${missing.join(', ')}`);
});

/** Words the example's comments put before a colon that are prose, not keys. */
const PROSE = new Set<string>([]);
