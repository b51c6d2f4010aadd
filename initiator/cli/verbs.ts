// The rblk verbs' command lines and one-line descriptions, apart from the
// modules that implement them (commands/*.ts), so that `rblk --help` lists
// every verb and `rblk VERB` loads only VERB's module (initiator/cli/main.ts;
// docs/performance.md "Command start-up").

export const VERBS = {
  discover: {
    command: 'discover <host>',
    describe:
      'List the volumes a target shows this initiator',
  },
  info: {
    command: 'info <url>',
    describe:
      'Show one volume: size, blocks, block size, access, serial, id, largest transfer, provider, and its paths (several gateways)',
  },
  read: {
    command: 'read <url>',
    describe:
      'Read a volume (or a range of it) to stdout or a file',
  },
  write: {
    command: 'write <url>',
    describe:
      'Write stdin or a file onto a volume (then flush it)',
  },
  bench: {
    command: 'bench <url>',
    describe:
      'Measure IOPS, bandwidth and latency (writes destroy data: they need --yes)',
  },
  verify: {
    command: 'verify <url>',
    describe:
      'Write a checksummed pattern and read it back (destroys data: needs --yes), or check one with --read-only',
  },
  attach: {
    command: 'attach <url>',
    describe:
      'Serve a volume as a local NBD export or FUSE file until SIGINT/SIGTERM',
  },
  mount: {
    command: 'mount <url> <dir>',
    describe:
      'Mount the filesystem on a volume (FUSE file, loop device, mount); --mkfs ext4 makes one first',
  },
  umount: {
    command: ['umount <target>', 'detach <target>'],
    describe:
      'Unmount a volume mounted with `rblk mount`, or stop an `rblk attach --fuse`',
  },
  list: {
    command: 'list',
    describe:
      'List volumes attached with `rblk mount` or `rblk attach --fuse`',
  },
} as const satisfies Record<string, { command: string | readonly string[]; describe: string }>;

export type Verb = keyof typeof VERBS;
