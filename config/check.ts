// `rblkd --check-config`: validate without starting anything, for people before a reload and
// for ExecStartPre-style checks. Exit status follows sysexits.h: 0, or 78 (EX_CONFIG).

import { ConfigError, formatIssue, type ConfigIssue } from './config-error.js';
import { loadConfig, type LoadOptions } from './loader.js';
import { EX_CONFIG, type Config } from './schema.js';

export type CheckResult =
  | { ok: true; config: Config; warnings: readonly ConfigIssue[] }
  | { ok: false; errors: readonly ConfigIssue[] };

export function checkConfig(path: string, options: LoadOptions = {}): CheckResult {
  try {
    const config = loadConfig(path, options);
    return { ok: true, config, warnings: config.warnings };
  } catch (e) {
    if (e instanceof ConfigError) return { ok: false, errors: e.errors };
    throw e;
  }
}

export interface TextSink {
  write(text: string): unknown;
}

/**
 * Prints `OK` (and any warnings, to err) or every error, one per line, to err. Returns the
 * process exit status: 0 or EX_CONFIG (78).
 */
export function runCheckConfig(
  path: string,
  out: TextSink = process.stdout,
  err: TextSink = process.stderr,
  options: LoadOptions = {},
): number {
  const result = checkConfig(path, options);
  if (result.ok) {
    for (const w of result.warnings) err.write(`${formatIssue(path, w, 'warning')}\n`);
    out.write('OK\n');
    return 0;
  }
  for (const e of result.errors) err.write(`${formatIssue(path, e)}\n`);
  return EX_CONFIG;
}
