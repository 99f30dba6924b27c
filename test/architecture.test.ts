import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_LINES, ROOT, commandProblems, findCycles, importGraph, layeringProblems, sizeProblems } from '../scripts/check-architecture.mjs';

/**
 * The layers docs/architecture.md draws hold in the imports: core imports
 * nothing of the project, redis imports core, runtime redis and core, service
 * those; the CLI, the dashboard and the integrations use only the public
 * entry points, as an application does. No module imports itself back.
 */
describe('the shape of src/', () => {
  const graph = importGraph(ROOT);

  it('reads every module', () => {
    expect(graph.get('src/index.ts')).toContain('src/service/delayed-event-service.ts');
    expect(graph.size).toBeGreaterThan(50);
  });

  it('has no import cycle', () => {
    expect(findCycles(graph)).toEqual([]);
  });

  it('keeps each layer to the layers below it, and the tools to the public entry points', () => {
    expect(layeringProblems(graph, ROOT)).toEqual([]);
  });

  it('sends Redis commands from src/redis/ and the loops only: service, cli, dashboard and integrations call it', () => {
    expect(commandProblems(ROOT)).toEqual([]);
  });

  it('catches a cycle and an import that runs back up', () => {
    const broken = new Map(graph);
    broken.set('src/core/names.ts', [...(graph.get('src/core/names.ts') ?? []), 'src/redis/redis-layout.ts']);
    broken.set('src/cli/format.ts', ['src/service/inspector.ts']);
    const problems = layeringProblems(broken, ROOT);
    expect(problems).toHaveLength(2);
    expect(problems).toEqual(
      expect.arrayContaining([expect.stringContaining('src/core/names.ts imports src/redis/redis-layout.ts'), expect.stringContaining('src/cli/format.ts imports src/service/inspector.ts')]),
    );
    broken.set('src/redis/redis-layout.ts', [...(graph.get('src/redis/redis-layout.ts') ?? []), 'src/core/names.ts']);
    expect(findCycles(broken).some((cycle) => cycle.includes('src/core/names.ts') && cycle.includes('src/redis/redis-layout.ts'))).toBe(true);
  });

  it('keeps every hand-written file of src/ and lua/ within 400 lines, and says which one is not', () => {
    expect(sizeProblems(ROOT)).toEqual([]);
    const root = mkdtempSync(join(tmpdir(), 'rde-size-'));
    try {
      mkdirSync(join(root, 'src', 'redis'), { recursive: true });
      mkdirSync(join(root, 'lua', 'includes'), { recursive: true });
      writeFileSync(join(root, 'src', 'redis', 'long.ts'), 'x;\n'.repeat(MAX_LINES + 1));
      writeFileSync(join(root, 'src', 'redis', 'long.generated.ts'), 'x;\n'.repeat(5_000));
      writeFileSync(join(root, 'lua', 'includes', 'fits.lua'), '--\n'.repeat(MAX_LINES));
      expect(sizeProblems(root)).toEqual([`src/redis/long.ts has ${MAX_LINES + 1} lines, over ${MAX_LINES}: split it by what its parts do`]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('runs as the lint step does, exiting 0', () => {
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'check-architecture.mjs')], { stdio: 'pipe' });
  });
});
