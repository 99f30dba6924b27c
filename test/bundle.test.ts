import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The codec's fast path reads class-transformer's decorator registry from its
 * cjs build. A bundler that resolves class-transformer's `module` field gives
 * the application's decorators another copy of that registry: the fast path
 * would then see no decorator and store fields they exclude or rename. The
 * codec checks at load that it reads the registry the decorators write, and
 * falls back to class-transformer itself when it does not.
 */
describe('bundled with class-transformer resolved through its `module` field', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rde-bundle-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function runBundled(mainFields: string[]): Promise<{ registryShared: boolean; body: unknown }> {
    const outfile = join(dir, `${mainFields.join('-')}.cjs`);
    await build({
      entryPoints: [join(__dirname, 'support', 'bundle-entry.ts')],
      bundle: true,
      platform: 'node',
      format: 'cjs',
      mainFields,
      tsconfig: join(__dirname, '..', 'tsconfig.json'),
      external: ['ioredis'],
      outfile,
      logLevel: 'silent',
    });
    return JSON.parse(execFileSync(process.execPath, [outfile], { encoding: 'utf8' })) as { registryShared: boolean; body: unknown };
  }

  it('stores a decorated event as class-transformer would, though the registry it reads is another copy', async () => {
    const bundled = await runBundled(['module', 'main']);
    // Two copies in the bundle: the check at load sees it.
    expect(bundled.registryShared).toBe(false);
    const [, payload] = bundled.body as [number, Record<string, unknown>];
    expect(payload).toEqual({ total: 7 });
  });

  it('takes the fast path when there is one copy (main)', async () => {
    const bundled = await runBundled(['main']);
    expect(bundled.registryShared).toBe(true);
    const [, payload] = bundled.body as [number, Record<string, unknown>];
    expect(payload).toEqual({ total: 7 });
  });
});
