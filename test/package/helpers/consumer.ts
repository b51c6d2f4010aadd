// A TypeScript consumer of 'rblk' with no ambient types (test/package/types-standalone, pack-install).
/** A consumer that uses Buffer and AbortSignal only through rblk's types. */
export const CONSUMER = [
  "import { connect, RblkError, type Session, type Volume } from 'rblk';",
  'export async function firstBlock(url: string): Promise<number> {',
  '  const session: Session = await connect(url);',
  '  const vol: Volume = await session.open();',
  '  const back = await vol.read(0, 4096);',
  '  await session.close();',
  '  return back.length;',
  '}',
  'export const isRblkError = (e: unknown): boolean => e instanceof RblkError;',
  '',
].join('\n');

/** Its tsconfig: no ambient types, no skipLibCheck. */
export const NO_AMBIENT_TYPES = {
  compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, types: [] },
  files: ['consumer.ts'],
};
