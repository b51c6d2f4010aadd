// Every problem in a configuration file is collected and reported together, one per line,
// in the `file:line: path: message` form that editors and CI logs make clickable.

import type { PathSegment } from './yaml-positions.js';

export interface ConfigIssue {
  /** Where in the data: 'volumes[1].block_size'; '' for the file as a whole. */
  path: string;
  /** The file it is in, when not the main file: a drop-in volume file. */
  file?: string;
  /** 1-based line in the YAML source, when the path could be found there. */
  line?: number;
  /** 1-based column; only YAML syntax errors know it. */
  column?: number;
  message: string;
}

/** Formats data path segments the way they are written in messages: volumes[1].block_size. */
export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(seg)) out += out === '' ? seg : `.${seg}`;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out;
}

/** `rblkd.yaml:12: volumes[1].block_size: must be 512 or 4096`; label goes after the place ("warning"). */
export function formatIssue(source: string, issue: ConfigIssue, label?: string): string {
  let where = issue.file ?? source;
  if (issue.line !== undefined) where += `:${issue.line}`;
  if (issue.line !== undefined && issue.column !== undefined) where += `:${issue.column}`;
  if (label !== undefined) where += `: ${label}`;
  return issue.path === '' ? `${where}: ${issue.message}` : `${where}: ${issue.path}: ${issue.message}`;
}

/** Issues with a line come first, in file order; the rest keep the order they were found in. */
export function sortIssues(issues: readonly ConfigIssue[]): ConfigIssue[] {
  return issues
    .map((issue, i) => ({ issue, i }))
    .sort((a, b) => (a.issue.line ?? Infinity) - (b.issue.line ?? Infinity) || a.i - b.i)
    .map((x) => x.issue);
}

export class ConfigError extends Error {
  readonly source: string;
  readonly errors: readonly ConfigIssue[];

  constructor(source: string, errors: readonly ConfigIssue[]) {
    const sorted = sortIssues(errors);
    super(sorted.map((e) => formatIssue(source, e)).join('\n'));
    this.name = 'ConfigError';
    this.source = source;
    this.errors = sorted;
  }
}
