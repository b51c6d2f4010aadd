// "Did you mean ...?" for a mistyped command or option: the known name
// nearest by edit distance, if it is near enough to be a typo rather than
// another word (docs/cli.md "Errors").

/** Levenshtein distance with adjacent transpositions (optimal string alignment). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/**
 * The candidate nearest to `word`, or undefined when none is within a third
 * of the word's length (at least 1, at most 3 edits), or when the word is a
 * prefix of exactly one candidate ("ben" → "bench").
 */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  const w = word.toLowerCase();
  const prefixed = candidates.filter((c) => c.startsWith(w));
  if (w.length >= 2 && prefixed.length === 1) return prefixed[0];
  const limit = Math.min(3, Math.max(1, Math.floor(w.length / 3)));
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const dist = editDistance(w, c.toLowerCase());
    if (dist < bestD) {
      best = c;
      bestD = dist;
    }
  }
  return bestD <= limit ? best : undefined;
}

/**
 * yargs' "Unknown argument(s): a, b" said word by word, for a command line
 * whose first word is a verb of `verbs`: a word typed as an option gets the
 * nearest of `options`, the first plain word the nearest verb, and a later
 * plain word is an unexpected argument. `valued` are the options that take
 * the next word as their value. Undefined when `msg` is another message.
 */
export function explainUnknown(msg: string, argv: readonly string[], verbs: readonly string[], options: readonly string[], valued: readonly string[] = []): string | undefined {
  const m = /^Unknown arguments?: (.+)$/.exec(msg);
  if (m === null) return undefined;
  const words = argv.filter((a, i) => !a.startsWith('-') && !valued.includes(argv[i - 1] ?? ''));
  const said = m[1].split(', ');
  // yargs names a dashed option twice, as typed and camel-cased (chek-config, chekConfig): say it once.
  const kebab = (w: string): string => w.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  return said
    .filter((w) => !/[A-Z]/.test(w) || !said.includes(kebab(w)))
    .map((w) => {
      if (argv.some((a) => a.startsWith('-') && a.replace(/^-+/, '').split('=')[0] === w)) {
        const near = nearest(w, options);
        return near === undefined ? `unknown option --${w}` : `unknown option --${w}: did you mean --${near}?`;
      }
      if (w !== words[0]) return `unexpected argument '${w}'`;
      const near = nearest(w, verbs);
      return near === undefined ? `unknown command '${w}': the commands are ${verbs.join(', ')}` : `unknown command '${w}': did you mean '${near}'?`;
    })
    .join('; ');
}
