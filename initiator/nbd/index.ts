// The NBD export: serves BlockDevices to NBD clients (qemu, nbdcopy, fio,
// nbd-client for /dev/nbdX).
export { NbdServer } from './server.js';
export type { NbdAddress, NbdListenOptions, NbdLog, NbdLogLevel, NbdServerOptions } from './server.js';
export { DEFAULT_PORT as NBD_DEFAULT_PORT } from './constants.js';
