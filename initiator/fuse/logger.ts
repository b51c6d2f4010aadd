// The logging FUSE attach needs; a winston Logger satisfies it.
export interface FuseLogger {
  info(message: string, meta?: Record<string, unknown>): unknown;
  warn(message: string, meta?: Record<string, unknown>): unknown;
  debug(message: string, meta?: Record<string, unknown>): unknown;
}

export const silentLogger: FuseLogger = {
  info: () => undefined,
  warn: () => undefined,
  debug: () => undefined,
};
