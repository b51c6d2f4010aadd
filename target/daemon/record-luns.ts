// state_dir/luns.json written before a volume is served (docs/operations.md
// "Stable LUNs"); config/lun-record.ts reads and writes the file.
import type { Config } from '../../config/schema.js';
import { writeLunRecord } from '../../config/lun-record.js';
import { asConfigRefusal, ConfigRefusal } from './config-refusal.js';
import { errorText } from '../error-text.js';
import { type DaemonLogger } from './logger.js';
import { plural } from './reload-result.js';
import { makeStateDir } from './volumes.js';

/**
 * Remembers the config's LUNs before any of them is served, so that a restart
 * or a later reload gives every volume the same one. A state directory that
 * cannot be written refuses the config, as any other config problem does.
 */
export async function recordLuns(config: Config, log: DaemonLogger): Promise<void> {
  if (!config.luns.changed) return;
  try {
    await makeStateDir(config.stateDir);
    await writeLunRecord(config.luns.file, config.luns.entries);
  } catch (e) {
    const what = `cannot record the volumes' LUNs in ${config.luns.file}`;
    const refusal = asConfigRefusal(what, e);
    throw refusal instanceof ConfigRefusal ? refusal : new Error(`${what}: ${errorText(e)}`, { cause: e });
  }
  log.debug(`recorded the LUNs of ${plural(config.volumes.length, 'volume')} in ${config.luns.file}`);
}
