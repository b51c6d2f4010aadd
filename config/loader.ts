// Reads rblkd.yaml in three passes: YAML syntax (js-yaml), shape (JSON Schema, every error),
// then the semantic checks in resolve.ts. Whatever is wrong comes back together in one
// ConfigError, each issue with its data path and, where the source shows it, its line.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve as resolvePath } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { YAMLException } from 'js-yaml';
import { ConfigError, formatPath, sortIssues, type ConfigIssue } from './config-error.js';
import { resolveConfig } from './resolve.js';
import { translateSchemaErrors, type PathIssue } from './schema-errors.js';
import { DEFAULT_VOLUMES_DIR, PATTERN_MESSAGE, configSchema, type Config } from './schema.js';
import { describeFsError } from './secret-file.js';
import { parseYamlWithPositions, type PositionedYaml } from './yaml-positions.js';

export interface LoadOptions {
  /** Replaces state_dir from the file (relative volume paths follow it). */
  stateDir?: string;
  /**
   * Who must own secret files: a uid, or 'any' to skip the owner check. By default the
   * effective uid, except for root, who can read any file and so checks modes only.
   */
  secretOwner?: number | 'any';
  /** Where relative secret_file and state_dir paths start; default: the file's directory. */
  baseDir?: string;
  /** Drop-in volume files, as loadConfig reads them from volumes_dir (docs/operations.md "Volumes from rblkd ctl"). */
  dropIns?: readonly DropIn[];
}

/** One drop-in file: its path (for messages) and text. Its only key is `volumes:`. */
export interface DropIn {
  file: string;
  text: string;
}

/**
 * The drop-in files of a volumes directory, `*.yaml` in name order; none when the directory
 * does not exist. Read here, not in resolve.ts, so that parseConfig stays a function of its inputs.
 */
export function readDropIns(dir: string): DropIn[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.yaml') && !n.startsWith('.')).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new ConfigError(dir, [{ path: '', message: `volumes_dir: ${describeFsError(e)}` }]);
  }
  return names.map((n) => {
    const file = join(dir, n);
    try {
      return { file, text: readFileSync(file, 'utf8') };
    } catch (e) {
      throw new ConfigError(file, [{ path: '', message: describeFsError(e) }]);
    }
  });
}

/** volumes_dir as the file gives it (default volumes.d), from the file's directory. */
export function volumesDirOf(data: unknown, configDir: string): string {
  const raw = data !== null && typeof data === 'object' ? (data as { volumes_dir?: unknown }).volumes_dir : undefined;
  return resolvePath(configDir, typeof raw === 'string' && raw !== '' ? raw : DEFAULT_VOLUMES_DIR);
}

let validator: ValidateFunction | undefined;

function validate(): ValidateFunction {
  if (!validator) {
    // verbose: the translator needs the offending value and the schema around it.
    const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true });
    ajv.addKeyword({ keyword: PATTERN_MESSAGE, schemaType: 'string' });
    validator = ajv.compile(configSchema);
  }
  return validator;
}

/** Reads and validates a configuration file; throws ConfigError listing every problem. */
export function loadConfig(path: string, options: LoadOptions = {}): Config {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(path, [{ path: '', message: describeFsError(e) }]);
  }
  return parseConfig(text, path, options, options.dropIns === undefined ? readDropIns : undefined);
}

/** Validates configuration text; sourceName names it in messages (usually its path). */
export function parseConfig(text: string, sourceName: string, options: LoadOptions = {}, readDir?: (dir: string) => DropIn[]): Config {
  let doc: PositionedYaml;
  try {
    doc = parseYamlWithPositions(text, sourceName);
  } catch (e) {
    if (e instanceof YAMLException) {
      throw new ConfigError(sourceName, [
        { path: '', line: e.mark.line + 1, column: e.mark.column + 1, message: `YAML syntax error: ${e.reason}` },
      ]);
    }
    throw e;
  }
  const configDir = options.baseDir ?? dirname(resolvePath(sourceName));
  const merged = mergeDropIns(doc, options.dropIns ?? readDir?.(volumesDirOf(doc.data, configDir)) ?? []);
  const data = merged.data;

  const check = validate();
  const schemaIssues =
    data === null || data === undefined || check(data) ? [] : translateSchemaErrors(check.errors ?? [], data);

  const euid = process.geteuid?.() ?? 0;
  const owner = options.secretOwner ?? (euid === 0 ? 'any' : euid);
  const resolved = resolveConfig(data, {
    source: sourceName,
    configDir,
    ...(options.stateDir !== undefined ? { stateDir: options.stateDir } : {}),
    ...(owner !== 'any' ? { uid: owner } : {}),
    rejected: new Set(schemaIssues.map((i) => formatPath(i.path))),
  });

  const located = (issues: readonly PathIssue[]): ConfigIssue[] =>
    issues.map((i) => {
      const d = merged.dropInOf(i.path);
      if (d !== undefined) {
        const line = d.doc.lineOf(d.path);
        return { file: d.file, path: formatPath(d.path), ...(line !== undefined ? { line } : {}), message: i.message };
      }
      const line = doc.lineOf(i.path);
      return { path: formatPath(i.path), ...(line !== undefined ? { line } : {}), message: i.message };
    });
  const errors = [...merged.issues, ...located([...schemaIssues, ...resolved.errors])];
  if (errors.length > 0 || !resolved.config) throw new ConfigError(sourceName, errors);
  // resolveListeners() keeps file order, one listener per entry.
  const listeners = resolved.config.listeners.map((l, i) => {
    const line = Array.isArray((data as { listeners?: unknown } | null)?.listeners) ? doc.lineOf(['listeners', i]) : undefined;
    return line !== undefined ? { ...l, line } : l;
  });
  return { ...resolved.config, listeners, warnings: sortIssues(located(resolved.warnings)) };
}

interface Merged {
  data: unknown;
  /** Problems of the drop-in files themselves (syntax, keys other than volumes). */
  issues: ConfigIssue[];
  /** For a path into a drop-in's volumes: its file, its document and the path inside it. */
  dropInOf(path: readonly (string | number)[]): { file: string; doc: PositionedYaml; path: (string | number)[] } | undefined;
}

/**
 * The main file's data with every drop-in's volumes after its own, in file order; the
 * whole is then checked as one config, so names, LUNs and paths clash across files as
 * within one, and each problem names the file and line it is on.
 */
function mergeDropIns(doc: PositionedYaml, dropIns: readonly DropIn[]): Merged {
  const issues: ConfigIssue[] = [];
  const ranges: { start: number; end: number; file: string; doc: PositionedYaml }[] = [];
  const main = doc.data;
  const mainVolumes = main !== null && typeof main === 'object' && Array.isArray((main as { volumes?: unknown }).volumes) ? ((main as { volumes: unknown[] }).volumes) : [];
  const volumes = [...mainVolumes];
  for (const d of dropIns) {
    let parsed: PositionedYaml;
    try {
      parsed = parseYamlWithPositions(d.text, d.file);
    } catch (e) {
      if (e instanceof YAMLException) issues.push({ file: d.file, path: '', line: e.mark.line + 1, column: e.mark.column + 1, message: `YAML syntax error: ${e.reason}` });
      else throw e;
      continue;
    }
    const v = parsed.data;
    if (v === null || v === undefined) continue;
    const keys = typeof v === 'object' && !Array.isArray(v) ? Object.keys(v) : null;
    const list = keys !== null ? (v as { volumes?: unknown }).volumes : undefined;
    if (keys === null || keys.some((k) => k !== 'volumes') || !Array.isArray(list)) {
      issues.push({ file: d.file, path: '', line: 1, message: 'a drop-in volume file holds one key, volumes: a list of volumes as in the main file' });
      continue;
    }
    ranges.push({ start: volumes.length, end: volumes.length + list.length, file: d.file, doc: parsed });
    volumes.push(...(list as unknown[]));
  }
  if (ranges.length === 0) return { data: main, issues, dropInOf: () => undefined };
  const data = { ...(main !== null && typeof main === 'object' ? main : {}), volumes };
  return {
    data,
    issues,
    dropInOf(path) {
      if (path[0] !== 'volumes' || typeof path[1] !== 'number') return undefined;
      const r = ranges.find((x) => (path[1] as number) >= x.start && (path[1] as number) < x.end);
      if (r === undefined) return undefined;
      return { file: r.file, doc: r.doc, path: ['volumes', (path[1] as number) - r.start, ...path.slice(2)] };
    },
  };
}
