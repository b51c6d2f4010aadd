// rblkd: the rblk target daemon's command line (docs/operations.md). Exit
// statuses follow sysexits.h: 0; 64 for a bad command line; 78 (EX_CONFIG)
// for a configuration that does not validate or a start it refuses (a volume's file
// gone since the check, target/daemon/config-refusal.ts); 70 (EX_SOFTWARE) for an
// internal error; 1 when serving could not start or a flush failed at stop.
// Only what every use needs is imported here; the configuration's schema and
// loader (ajv), the logger (winston) and the daemon are loaded by the paths
// that use them, so `rblkd ctl` and `--help` start without them
// (docs/performance.md "Command start-up").
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import type { LoadOptions } from '../config/loader.js';
import { DEFAULT_CONFIG_PATH, EX_CONFIG } from '../config/paths.js';
import type { Config } from '../config/schema.js';
import type { Daemon } from '../target/daemon/daemon.js';
import type { DaemonLogger } from '../target/daemon/logger.js';
import { explainUnknown, nearest } from '../initiator/cli/suggest.js';
import { packageVersion } from './package-version.js';

/** sysexits.h EX_USAGE. */
const EX_USAGE = 64;
/** After drain_timeout_ms, this long for logouts, flushes and closes before giving up. */
const STOP_GRACE_MS = 5000;

interface Args {
  config: string;
  checkConfig?: string;
  stateDir?: string;
}

function fail(message: string, code: number): never {
  process.stderr.write(`rblkd: ${message}\n`);
  process.exit(code);
}

function parseArgs(argv: string[]): Args {
  const parsed = yargs(argv)
    .scriptName('rblkd')
    .usage('$0 [--config FILE] [--state-dir DIR]\n$0 --check-config [FILE]\n$0 ctl <status|sessions|volumes|kick SESSION|reload [--force]|snapshot VOLUME NAME|snapshots VOLUME|delete-snapshot VOLUME NAME|clone VOLUME@SNAP NEW|flatten VOLUME|create NAME ...|resize VOLUME SIZE|qos VOLUME ...|delete VOLUME [--force]> [--json] [--socket PATH]   (rblkd ctl --help: the arguments of each)\n\nThe rblk target daemon: serves block volumes to rblk initiators over libfabric.')
    .option('config', { type: 'string', default: DEFAULT_CONFIG_PATH, describe: 'configuration file', requiresArg: true })
    .option('check-config', {
      type: 'string',
      describe: 'validate FILE (or --config) and exit: prints OK, or every error; exit 0 or 78',
    })
    .option('state-dir', { type: 'string', describe: 'replaces state_dir from the file', requiresArg: true })
    .version(packageVersion())
    .help()
    .alias('help', 'h')
    .strict()
    .fail((msg, err) => {
      const raw = msg ?? err?.message ?? 'invalid command line';
      // ctl is rblkd's one command (dispatched before this parser): a near miss is a typo of it.
      const said = explainUnknown(raw, argv, ['ctl'], ['config', 'check-config', 'state-dir', 'version', 'help'], ['--config', '--state-dir']);
      fail(said === undefined ? raw : `${said} (see --help)`, EX_USAGE);
    })
    .parseSync();
  if (parsed._.length > 0) {
    const word = String(parsed._[0]);
    fail(`unknown command '${word}': ${nearest(word, ['ctl']) !== undefined ? "did you mean 'ctl'?" : "rblkd's one command is ctl"} (see --help)`, EX_USAGE);
  }
  return {
    config: parsed.config,
    ...(parsed['check-config'] !== undefined ? { checkConfig: parsed['check-config'] } : {}),
    ...(parsed['state-dir'] !== undefined ? { stateDir: parsed['state-dir'] } : {}),
  };
}

async function serve(args: Args, config: Config, log: DaemonLogger): Promise<number> {
  const { describeError } = await import('../target/daemon/logger.js');
  const { errorText } = await import('../target/error-text.js');
  const { installSignals } = await import('../target/daemon/signals.js');
  // The handlers go in before the start: until a listener is added, Node leaves SIGTERM, SIGINT
  // and SIGHUP at their default action, which ends the process at once, without the drain, and
  // the start still runs for a moment after it has logged `rblkd ready` and sent READY=1. A
  // signal that arrives while volumes open and listeners bind is acted on once that is done
  // (docs/operations.md "Start-up").
  let daemon: Daemon | null = null;
  let pendingStop: boolean | null = null;
  let pendingReload = false;
  let deadline: NodeJS.Timeout | null = null;
  let resolveStopped: (code: number) => void = () => undefined;
  const stopped = new Promise<number>((resolve) => (resolveStopped = resolve));
  const stop = (d: Daemon, force: boolean): void => {
    d.stop(force).then(resolveStopped, (e: unknown) => {
      log.error(`stop failed: ${describeError(e)}`);
      resolveStopped(1);
    });
  };
  const reload = (d: Daemon): void => {
    // A reload that fails reports why and keeps serving the old configuration (docs/operations.md).
    // SIGHUP has no --force: removing a volume that sessions can see is refused and logged
    // (docs/operations.md "Removing a volume in use").
    d.reload().catch((e: unknown) => log.error(`reload failed: ${describeError(e)}`));
  };
  const removeSignals = installSignals({
    reload: () => {
      if (daemon !== null) reload(daemon);
      else if (!pendingReload) {
        pendingReload = true;
        log.info('reload requested while starting: reloading once started');
      }
    },
    stop: (force) => {
      if (deadline === null) {
        // From the first signal, whether or not the start has finished.
        const ms = (daemon?.currentConfig ?? config).limits.drainTimeoutMs + STOP_GRACE_MS;
        deadline = setTimeout(() => {
          log.error(`stop did not finish within ${ms} ms; exiting without it`);
          process.exit(1);
        }, ms);
        deadline.unref();
      }
      if (daemon !== null) stop(daemon, force);
      else {
        if (pendingStop === null) log.info('stop requested while starting: stopping once started');
        pendingStop = pendingStop === true || force;
      }
    },
  });
  try {
    // Loaded here, not at the top: it loads the native addon, which --check-config and --help do without.
    const { Daemon } = await import('../target/daemon/daemon.js');
    daemon = await Daemon.start(config, { configPath: args.config, ...(args.stateDir !== undefined ? { stateDir: args.stateDir } : {}), log, version: packageVersion() });
  } catch (e) {
    removeSignals();
    // A refusal for a reason in the file exits 78, which systemd does not restart into (config-refusal.ts).
    const { ConfigRefusal } = await import('../target/daemon/config-refusal.js');
    const refused = e instanceof ConfigRefusal;
    log.error(`cannot start: ${errorText(e)}${refused ? ' (a configuration error: exit 78)' : ''}`);
    log.debug(describeError(e));
    return refused ? EX_CONFIG : 1;
  }
  if (pendingStop !== null) stop(daemon, pendingStop);
  else if (pendingReload) reload(daemon);
  return stopped;
}

async function main(): Promise<number> {
  const argv = hideBin(process.argv);
  if (argv[0] === 'ctl') {
    // Loaded only for `rblkd ctl`: the daemon's start needs none of it.
    const { runCtl } = await import('./rblkd-ctl.js');
    return runCtl(argv.slice(1));
  }
  const args = parseArgs(argv);
  const loadOptions: LoadOptions = args.stateDir !== undefined ? { stateDir: args.stateDir } : {};
  if (args.checkConfig !== undefined) {
    const { runCheckConfig } = await import('../config/check.js');
    return runCheckConfig(args.checkConfig === '' ? args.config : args.checkConfig, process.stdout, process.stderr, loadOptions);
  }
  const { loadConfig } = await import('../config/loader.js');
  const { ConfigError } = await import('../config/config-error.js');
  const { createDaemonLogger, installCrashHandlers } = { ...(await import('../target/daemon/logger.js')), ...(await import('../target/daemon/signals.js')) };
  let config: Config;
  try {
    config = loadConfig(args.config, loadOptions);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    // Every problem, one per line, as --check-config prints them.
    process.stderr.write(`${e.message}\n`);
    return EX_CONFIG;
  }
  const log = createDaemonLogger(config.logging);
  installCrashHandlers(log);
  return serve(args, config, log);
}

main().then(
  (code) => process.exit(code),
  async (e: unknown) => fail((await import('../target/daemon/logger.js')).describeError(e), 70),
);
