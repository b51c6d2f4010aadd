// Where attachments are recorded (initiator/fuse/attachment-record.ts) and the
// default NBD socket lives: /run/rblk, or $RBLK_STATE_DIR, or --state-dir.
import { resolve } from 'node:path';
import { DEFAULT_STATE_DIR } from '../fuse/attachment-record.js';

export const stateDirOption = {
  'state-dir': {
    type: 'string',
    requiresArg: true,
    describe: `attachment records and NBD sockets (default $RBLK_STATE_DIR or ${DEFAULT_STATE_DIR})`,
  },
} as const;

export function stateDir(a: { 'state-dir'?: string }): string {
  return resolve(a['state-dir'] ?? process.env.RBLK_STATE_DIR ?? DEFAULT_STATE_DIR);
}
