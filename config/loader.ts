// Reads rblkd.yaml in three passes: YAML syntax (js-yaml), shape (JSON Schema, every error),
// then the semantic checks in resolve.ts. Whatever is wrong comes back together in one
// ConfigError, each issue with its data path and, where the source shows it, its line.

import { readFileSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { YAMLException } from 'js-yaml';
import { ConfigError, formatPath, sortIssues, type ConfigIssue } from './config-error.js';
import { resolveConfig } from './resolve.js';
import { translateSchemaErrors, type PathIssue } from './schema-errors.js';
import { PATTERN_MESSAGE, configSchema, type Config } from './schema.js';
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
  return parseConfig(text, path, options);
}

/** Validates configuration text; sourceName names it in messages (usually its path). */
export function parseConfig(text: string, sourceName: string, options: LoadOptions = {}): Config {
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
  const data = doc.data;

  const check = validate();
  const schemaIssues =
    data === null || data === undefined || check(data) ? [] : translateSchemaErrors(check.errors ?? [], data);

  const euid = process.geteuid?.() ?? 0;
  const owner = options.secretOwner ?? (euid === 0 ? 'any' : euid);
  const resolved = resolveConfig(data, {
    source: sourceName,
    configDir: options.baseDir ?? dirname(resolvePath(sourceName)),
    ...(options.stateDir !== undefined ? { stateDir: options.stateDir } : {}),
    ...(owner !== 'any' ? { uid: owner } : {}),
    rejected: new Set(schemaIssues.map((i) => formatPath(i.path))),
  });

  const located = (issues: readonly PathIssue[]): ConfigIssue[] =>
    issues.map((i) => {
      const line = doc.lineOf(i.path);
      return { path: formatPath(i.path), ...(line !== undefined ? { line } : {}), message: i.message };
    });
  const errors = located([...schemaIssues, ...resolved.errors]);
  if (errors.length > 0 || !resolved.config) throw new ConfigError(sourceName, errors);
  // resolveListeners() keeps file order, one listener per entry.
  const listeners = resolved.config.listeners.map((l, i) => {
    const line = Array.isArray((data as { listeners?: unknown } | null)?.listeners) ? doc.lineOf(['listeners', i]) : undefined;
    return line !== undefined ? { ...l, line } : l;
  });
  return { ...resolved.config, listeners, warnings: sortIssues(located(resolved.warnings)) };
}
