// The logging the SCSI core needs; a winston Logger satisfies it.
export interface ScsiLogger {
  warn(message: string, meta?: Record<string, unknown>): void;
}

export const silentLogger: ScsiLogger = { warn: () => undefined };
