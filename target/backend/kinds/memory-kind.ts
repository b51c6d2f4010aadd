// `memory: true`: a RAM volume of the configured size, for tests and demos; it needs no
// native code. Its blocks are gone when rblkd stops.

import { totalmem } from 'node:os';
import { formatSize } from '../../../config/size.js';
import type { BackendKind } from '../kind.js';
import { MemoryBackend } from '../memory.js';

export interface MemoryBacking {
  readonly kind: 'memory';
  readonly size: number;
}

export const memoryKind: BackendKind<MemoryBacking> = {
  kind: 'memory',
  key: 'memory',
  keyText: "'memory: true'",
  describes: '',
  selected: (v) => v === true,
  properties: { memory: { type: 'boolean' } },
  descriptorOptions: false,
  resolve(input) {
    if (!input.sizeGiven) {
      input.error(undefined, "'memory: true' needs size");
      return undefined;
    }
    if (input.size === undefined) return undefined;
    if (input.size > totalmem()) {
      // The memory backend keeps every block written in RAM: an initiator filling a volume
      // larger than RAM ends in the OOM killer, which takes every other volume with it.
      const ram = `${(totalmem() / 1024 ** 3).toFixed(1)} GiB`;
      input.error('size', `a memory volume of ${formatSize(input.size)} does not fit in this host's memory (${ram})`);
      return undefined;
    }
    return { kind: 'memory', size: input.size };
  },
  claim: () => undefined,
  where: () => 'memory',
  configuredSize: (b) => b.size,
  defaultDirect: () => false,
  open: (b, o) => Promise.resolve(new MemoryBackend({ size: b.size, readOnly: o.readOnly, name: o.name })),
  grow(_b, backend, size) {
    if (backend instanceof MemoryBackend) backend.resize(size);
    return Promise.resolve();
  },
};
