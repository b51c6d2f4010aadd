// The `rblk` command line (docs/cli.md): yargs for parsing and --help, one
// module per command under commands/, and one place that turns a failure
// into a line on stderr and an exit status.
import yargs, { type Argv } from 'yargs';
import { describeError, EXIT_OK, exitCodeFor, QuietExit, UsageError } from './cli-error.js';
import { nearest } from './suggest.js';
import { VERBS, type Verb } from './verbs.js';

type Base = { debug: boolean };
type AddCommand = (y: Argv<Base>) => Argv<Base>;

/**
 * Each verb's module, loaded only when the command line names that verb: a
 * module brings what its verb needs (the NBD server, the bench engine, the
 * library and its transports), which `rblk --help` and the other verbs do
 * without (docs/performance.md "Command start-up"; test/cli/lazy-load.test.ts).
 */
const LOADERS: Record<Verb, () => Promise<AddCommand>> = {
  discover: async () => (await import('./commands/discover.js')).discoverCommand,
  info: async () => (await import('./commands/info.js')).infoCommand,
  read: async () => (await import('./commands/read.js')).readCommand,
  write: async () => (await import('./commands/write.js')).writeCommand,
  bench: async () => (await import('./commands/bench.js')).benchCommand,
  verify: async () => (await import('./commands/verify.js')).verifyCommand,
  attach: async () => (await import('./commands/attach.js')).attachCommand,
  mount: async () => (await import('./commands/mount.js')).mountCommand,
  umount: async () => (await import('./commands/umount.js')).umountCommand,
  list: async () => (await import('./commands/list.js')).listCommand,
};

const SECRET_FLAG = /^--secret(=|$)/;
/** The verbs, with umount's alias: what a mistyped first word is compared with. */
export const COMMANDS = ['discover', 'info', 'read', 'write', 'bench', 'verify', 'attach', 'mount', 'umount', 'detach', 'list'] as const;

/** "unknown command 'X'" with the nearest verb, when the first word is none of them. */
function checkVerb(argv: readonly string[]): void {
  const verb = argv.find((x) => !x.startsWith('-'));
  if (verb === undefined || (COMMANDS as readonly string[]).includes(verb)) return;
  const near = nearest(verb, COMMANDS);
  const hint = near === undefined ? `the commands are ${COMMANDS.filter((c) => c !== 'detach').join(', ')}` : `did you mean '${near}'?`;
  throw new UsageError(`unknown command '${verb}': ${hint} (see --help)`);
}

/** The options yargs knows at this point (getOptions is public in yargs but missing from its types). */
function optionNames(y: unknown): string[] {
  return Object.keys((y as { getOptions(): { key: Record<string, unknown> } }).getOptions().key);
}

/**
 * yargs' "Unknown argument(s): a, b" with the nearest known option for each,
 * as the user would type it (--name).
 */
function unknownOptions(msg: string, known: readonly string[]): string | undefined {
  const m = /^Unknown arguments?: (.+)$/.exec(msg);
  if (m === null) return undefined;
  const names = known.filter((k) => !/[A-Z]/.test(k) && k !== '_' && k !== '$0');
  const parts = m[1].split(', ').map((word) => {
    const bare = word.replace(/^-+/, '');
    const near = nearest(bare, names);
    const shown = bare.length === 1 ? `-${bare}` : `--${bare}`;
    return near === undefined ? `unknown option ${shown}` : `unknown option ${shown}: did you mean --${near}?`;
  });
  return parts.join('; ');
}

/**
 * yargs' "Invalid values: Argument: rw, Given: "rea", Choices: "read", ..."
 * (after the newlines became ": ") said per option, with the nearest choice:
 * `--rw rea is not one of read, write, mixed: did you mean read?`.
 */
function invalidChoices(msg: string): string | undefined {
  if (!msg.startsWith('Invalid values:')) return undefined;
  const parts = [...msg.matchAll(/Argument: ([^,]+), Given: ("(?:[^"\\]|\\.)*"|[^,]+), Choices: ((?:"[^"]*"(?:, )?)+)/g)].map((m) => {
    const given = m[2].startsWith('"') ? (JSON.parse(m[2]) as string) : m[2];
    const choices = [...m[3].matchAll(/"([^"]*)"/g)].map((c) => c[1]);
    const near = nearest(given, choices);
    return `--${m[1]} ${given} is not one of ${choices.join(', ')}${near === undefined ? '' : `: did you mean ${near}?`}`;
  });
  return parts.length === 0 ? undefined : parts.join('; ');
}

/** What each verb's positional arguments are, as a missing one is named (`rblk read needs ...`). */
const POSITIONALS: Record<string, readonly string[]> = {
  discover: ['a target, HOST[:PORT]'],
  info: ["the volume's URL, rblk://host[:port]/VOLUME"],
  read: ["the volume's URL, rblk://host[:port]/VOLUME"],
  write: ["the volume's URL, rblk://host[:port]/VOLUME"],
  bench: ["the volume's URL, rblk://host[:port]/VOLUME"],
  verify: ["the volume's URL, rblk://host[:port]/VOLUME"],
  attach: ["the volume's URL, rblk://host[:port]/VOLUME"],
  mount: ["the volume's URL, rblk://host[:port]/VOLUME", 'the mount point DIR'],
  umount: ['the mount point or FUSE directory (rblk list shows them)'],
  detach: ['the mount point or FUSE directory (rblk list shows them)'],
};

/**
 * yargs' "Not enough non-option arguments: got 0, need at least 1" said as
 * what is missing: `rblk read needs the volume's URL, rblk://host[:port]/VOLUME`.
 */
function missingPositionals(msg: string, argv: readonly string[]): string | undefined {
  const m = /^Not enough non-option arguments: got (\d+), need at least (\d+)/.exec(msg);
  const verb = argv.find((x) => !x.startsWith('-'));
  if (m === null || verb === undefined) return undefined;
  const wanted = POSITIONALS[verb];
  if (wanted === undefined) return undefined;
  // yargs counts the command's own positionals, not the verb.
  const missing = wanted.slice(Number(m[1]));
  return missing.length === 0 ? undefined : `rblk ${verb} needs ${missing.join(' and ')}`;
}

/** Whether argv asks for stack traces (looked at before parsing, so parse errors honour it too). */
function wantsDebug(argv: readonly string[]): boolean {
  return argv.includes('--debug');
}

/**
 * The parser for one command line, ready for parseAsync(): every check that
 * needs no target is in it (yargs validation and the commands' .check()), so
 * a middleware added after validation sees only command lines that would
 * reach a handler (test/package/readme-commands.test.ts runs README's lines so).
 * Throws UsageError for a refused --secret or an unknown verb.
 */
export async function buildParser(argv: string[], version: string): Promise<Argv<{ debug: boolean }>> {
  // A secret in argv shows in `ps` and shell history; refuse it by name rather than as an unknown option.
  if (argv.some((x) => SECRET_FLAG.test(x))) {
    throw new UsageError('--secret is not accepted: put the secret in a file (--secret-file FILE, mode 0600) or in $RBLK_SECRET');
  }
  checkVerb(argv);
  let parser = yargs(argv)
    .scriptName('rblk')
    .usage('$0 <command> [options]\n\nDiscover, benchmark, verify and attach rblk volumes (docs/cli.md).')
    .option('debug', { type: 'boolean', default: false, global: true, describe: 'print stack traces and debug logging' });
  // The verb named is defined whole (options, checks, handler); the others only by name and
  // description, for the command list of --help and "no command given".
  const first = argv.find((x) => !x.startsWith('-'));
  const named: Verb | undefined = first === 'detach' ? 'umount' : (Object.keys(VERBS) as Verb[]).find((v) => v === first);
  for (const verb of Object.keys(VERBS) as Verb[]) {
    parser = verb === named ? (await LOADERS[verb]())(parser) : parser.command(VERBS[verb].command, VERBS[verb].describe);
  }
  return parser
    .demandCommand(1, 'no command given')
    .strict()
    .exitProcess(false)
    .fail((msg, err) => {
      // yargs routes a handler's own errors here too: let those through unchanged.
      if (err !== undefined && err !== null && err.name !== 'YError') throw err;
      // Some yargs messages span lines ("Invalid values:\n  Argument: ..."); an error is one line.
      const raw = (msg ?? err?.message ?? 'invalid command line').replace(/:?\s*\n\s*/g, ': ');
      const text = missingPositionals(raw, argv) ?? unknownOptions(raw, optionNames(parser)) ?? invalidChoices(raw) ?? raw;
      throw new UsageError(`${text} (see --help)`);
    })
    .version(version)
    .help()
    .alias('help', 'h')
    .wrap(Math.min(110, process.stdout.columns ?? 110));
}

/**
 * Runs one command line (without the node and script arguments) and resolves
 * the exit status. Errors are written to stderr here: one line, and the stack
 * as well with --debug.
 */
export async function main(argv: string[], version: string): Promise<number> {
  try {
    await (await buildParser(argv, version)).parseAsync();
    return EXIT_OK;
  } catch (e) {
    const code = exitCodeFor(e);
    if (e instanceof QuietExit) return code;
    process.stderr.write(`rblk: ${describeError(e)}\n`);
    if (wantsDebug(argv) && e instanceof Error && e.stack !== undefined) process.stderr.write(`${e.stack}\n`);
    return code;
  }
}
