// The constants that `rblkd --help` and `rblkd ctl` need, apart from the
// schema (config/schema.ts re-exports them), so that those load neither the
// backend registry nor ajv (docs/performance.md "Command start-up").

export const DEFAULT_CONFIG_PATH = '/etc/rblk/rblkd.yaml';
/** The control socket `rblkd ctl` talks to (docs/operations.md "The control socket"); systemd's RuntimeDirectory=rblk makes its directory. */
export const DEFAULT_CONTROL_SOCKET = '/run/rblk/rblkd.ctl';
/** sysexits.h EX_CONFIG: what `rblkd --check-config` and a refused start exit with. */
export const EX_CONFIG = 78;
