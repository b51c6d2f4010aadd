// A listener that could not start, named the way an operator finds it: provider, address and
// port, and the config line it came from. The native error underneath (fi_getinfo found no
// provider for that address; fi_passive_ep found the port in use) names none of them.
import type { ListenerConfig } from '../../config/schema.js';
import { listenerName } from '../front-end/registry.js';

export class ListenError extends Error {
  readonly code: string | undefined;
  readonly errno: number | undefined;
  readonly op: string | undefined;

  constructor(l: ListenerConfig, source: string, cause: unknown) {
    const where = l.line !== undefined ? `${source}:${l.line}` : `${source}, default listener`;
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`cannot listen on ${listenerName(l)} (${where}): ${why}`, { cause });
    this.name = 'ListenError';
    const c = (typeof cause === 'object' && cause !== null ? cause : {}) as { code?: unknown; errno?: unknown; op?: unknown };
    this.code = typeof c.code === 'string' ? c.code : undefined;
    this.errno = typeof c.errno === 'number' ? c.errno : undefined;
    this.op = typeof c.op === 'string' ? c.op : undefined;
  }
}
