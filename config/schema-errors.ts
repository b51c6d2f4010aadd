// Turns ajv's errors into sentences an operator can act on: "unknown key 'voulmes' (did you
// mean 'volumes'?)" rather than "must NOT have additional properties".

import type { ErrorObject } from 'ajv';
import { PATTERN_MESSAGE } from './schema.js';
import type { PathSegment } from './yaml-positions.js';

export interface PathIssue {
  path: PathSegment[];
  message: string;
}

/** Splits ajv's JSON Pointer instancePath, turning segments that index an array into numbers. */
export function pointerToPath(pointer: string, root: unknown): PathSegment[] {
  if (pointer === '') return [];
  const path: PathSegment[] = [];
  let value = root;
  for (const raw of pointer.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(value)) {
      path.push(Number(seg));
      value = value[Number(seg)];
    } else {
      path.push(seg);
      value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[seg] : undefined;
    }
  }
  return path;
}

export function translateSchemaErrors(errors: readonly ErrorObject[], root: unknown): PathIssue[] {
  const out: PathIssue[] = [];
  const seen = new Set<string>();
  for (const err of errors) {
    const path = pointerToPath(err.instancePath, root);
    const issue = translateOne(err, path);
    const key = `${JSON.stringify(issue.path)}\0${issue.message}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(issue);
    }
  }
  return out;
}

function translateOne(err: ErrorObject, path: PathSegment[]): PathIssue {
  const params = err.params as Record<string, unknown>;
  switch (err.keyword) {
    case 'additionalProperties': {
      const key = String(params.additionalProperty);
      const known = Object.keys((err.parentSchema?.properties as Record<string, unknown> | undefined) ?? {});
      const hint = suggest(key, known);
      return {
        path: [...path, key],
        message: `unknown key '${key}'${hint ? ` (did you mean '${hint}'?)` : ''}`,
      };
    }
    case 'required':
      return { path, message: `missing required key '${String(params.missingProperty)}'` };
    case 'type':
      return { path, message: typeMessage(String(params.type), err.data) };
    case 'enum': {
      const allowed = (params.allowedValues as unknown[]) ?? [];
      const hint = typeof err.data === 'string' ? suggest(err.data, allowed.map(String)) : undefined;
      return {
        path,
        message:
          `must be ${oneOf(allowed.map(show))}, not ${show(err.data)}` + (hint ? ` (did you mean '${hint}'?)` : ''),
      };
    }
    case 'minimum':
      return { path, message: `must be at least ${String(params.limit)}, not ${show(err.data)}` };
    case 'maximum':
      return { path, message: `must be at most ${String(params.limit)}, not ${show(err.data)}` };
    case 'minItems':
      return { path, message: `must list at least ${String(params.limit)} item(s)` };
    case 'minLength':
      return { path, message: 'must not be empty' };
    case 'pattern': {
      const custom = err.parentSchema?.[PATTERN_MESSAGE];
      const message = typeof custom === 'string' ? custom : `must match ${String(params.pattern)}`;
      return { path, message: `${message}, not ${show(err.data)}` };
    }
    default:
      return { path, message: err.message ?? `fails ${err.keyword}` };
  }
}

const TYPE_NAMES: Record<string, string> = {
  object: 'a mapping',
  array: 'a list',
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'a boolean (true or false)',
  null: 'empty',
};

function describe(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'number') return `the number ${value}`;
  if (typeof value === 'string') return `the string ${show(value)}`;
  return String(value);
}

function typeMessage(expected: string, data: unknown): string {
  const want = oneOf(expected.split(',').map((t) => TYPE_NAMES[t] ?? t));
  let message = `must be ${want}, not ${describe(data)}`;
  // YAML reads serial: 0123 or uuid-like digits as numbers; quoting is the fix.
  if (expected === 'string' && (typeof data === 'number' || typeof data === 'boolean')) {
    message += ` (quote it: '${String(data)}')`;
  }
  return message;
}

function show(value: unknown): string {
  return typeof value === 'string' ? `'${value}'` : JSON.stringify(value) ?? String(value);
}

function oneOf(items: string[]): string {
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}

/** The closest known word within a couple of edits (optimal string alignment distance). */
export function suggest(word: string, candidates: readonly string[]): string | undefined {
  const limit = Math.max(1, Math.floor(word.length / 3));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) =>
    Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[rows - 1][cols - 1];
}
