import test from 'ava';
import { checkConfig, runCheckConfig, type TextSink } from '../../config/check.js';
import { EX_CONFIG } from '../../config/schema.js';
import { put, tempDir } from './helpers/tmp.js';

function sink(): TextSink & { text: string } {
  return {
    text: '',
    write(s: string) {
      this.text += s;
      return true;
    },
  };
}

test('a valid file prints OK and exits 0', (t) => {
  const dir = tempDir(t);
  const file = put(dir, 'rblkd.yaml', 'volumes:\n  - {name: a, memory: true, size: 1MiB}\n');
  const out = sink();
  const err = sink();
  t.is(runCheckConfig(file, out, err), 0);
  t.is(out.text, 'OK\n');
  t.is(err.text, '');
  const result = checkConfig(file);
  t.true(result.ok);
  if (result.ok) t.is(result.config.volumes[0].name, 'a');
});

test('warnings go to stderr and do not fail the check', (t) => {
  const dir = tempDir(t);
  const file = put(dir, 'rblkd.yaml', 'listeners:\n  - address: 0.0.0.0\n');
  const out = sink();
  const err = sink();
  t.is(runCheckConfig(file, out, err), 0);
  t.is(out.text, 'OK\n');
  t.is(
    err.text,
    `${file}:1: warning: volumes: no volumes are configured\n` +
      `${file}:2: warning: listeners[0].address: serves 0.0.0.0 without authentication (auth.required is false)\n`,
  );
});

test('an invalid file prints every error and exits 78 (EX_CONFIG)', (t) => {
  const dir = tempDir(t);
  const file = put(dir, 'rblkd.yaml', 'volumes:\n  - name: a\n    block_size: 1000\nlogging: {level: loud}\n');
  const out = sink();
  const err = sink();
  t.is(EX_CONFIG, 78);
  t.is(runCheckConfig(file, out, err), 78);
  t.is(out.text, '');
  t.is(
    err.text,
    [
      `${file}:2: volumes[0]: needs path (a file or block device) or 'memory: true'`,
      `${file}:3: volumes[0].block_size: must be 512 or 4096, not 1000`,
      `${file}:4: logging.level: must be 'error', 'warn', 'info' or 'debug', not 'loud'`,
      '',
    ].join('\n'),
  );
  const result = checkConfig(file);
  t.false(result.ok);
  if (!result.ok) t.is(result.errors.length, 3);
});

test('a missing file exits 78 too', (t) => {
  const dir = tempDir(t);
  const err = sink();
  t.is(runCheckConfig(`${dir}/absent.yaml`, sink(), err), EX_CONFIG);
  t.is(err.text, `${dir}/absent.yaml: does not exist\n`);
});
