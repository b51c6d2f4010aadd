// The version both command lines print (rblk --version, rblkd --version).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's version, from the package.json above this file (source or dist layout). */
export function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    const p = join(dir, 'package.json');
    if (existsSync(p)) return (JSON.parse(readFileSync(p, 'utf8')) as { version?: string }).version ?? 'unknown';
    dir = dirname(dir);
  }
  return 'unknown';
}
