// What the daemon builds its TargetServer with from a config: the server's
// options (limits, secrets, fast path) and the reactor threads
// (docs/operations.md "reactors"). daemon.ts calls these at start and on
// every reload.
import { errorText } from '../error-text.js';
import type { Config } from '../../config/schema.js';
import { FastPath } from '../../native/fast-path.js';
import { Reactors } from '../../native/reactors.js';
import type { TargetServerOptions } from '../server.js';
import { type DaemonLogger } from './logger.js';

/** Descriptors per command: one RMA per rma_iov_limit of them, so a few more than any provider's limit is enough. */
const MAX_DESCRIPTORS = 16;

export function serverOptions(config: Config, log: DaemonLogger, reactors: Reactors | null): TargetServerOptions {
  const l = config.limits;
  return {
    targetName: config.targetName,
    ...(config.nqn !== undefined ? { nqn: config.nqn } : {}),
    limits: {
      queueDepth: l.queueDepth,
      maxIo: l.maxIo,
      inCapsuleData: l.inCapsuleData,
      maxDescriptors: MAX_DESCRIPTORS,
      // keepalive_ms is how long a silent session lives; the session ends one
      // after 2 × the interval it negotiates (docs/protocol.md §13).
      keepAliveMs: Math.floor(l.keepaliveMs / 2),
      loginTimeoutMs: l.loginTimeoutMs,
      maxSessions: l.maxSessions,
      preLoginConnections: l.preLoginConnections,
      preLoginPerSource: l.preLoginPerSource,
      connectionMemory: l.connectionMemory,
    },
    authRequired: config.auth.required,
    secrets: new Map(config.auth.initiators.map((i) => [i.name, i.secret])),
    log,
    fastPath: config.fastPath,
    reactors,
    busyPollMicros: config.busyPollMicros,
  };
}

/**
 * The reactor threads `reactors` asks for (docs/operations.md "reactors"), or
 * null: none asked for ('auto' on fewer than 4 cores), no native fast path on
 * this host, or threads that could not start (logged; the JS thread serves).
 */
export function startReactors(config: Config, log: DaemonLogger): Reactors | null {
  const count = config.reactors === 'auto' ? Reactors.autoCount() : config.reactors;
  if (count === 0 || !FastPath.available()) return null;
  try {
    return Reactors.start(count);
  } catch (e) {
    log.warn(`reactors: cannot start ${count} thread(s), the JS thread serves every connection: ${errorText(e)}`);
    return null;
  }
}
