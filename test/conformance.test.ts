import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, type DelayedEventInstance } from '../src';
import { EventCodec } from '../src/core/event-codec';
import { RedisLayout } from '../src/redis/redis-layout';
import { extrasOf } from '../src/service/enqueue-options';
import { windowPolicyOf } from '../src/service/enqueue-windows';
import { parseEnvelope } from '../src/core/envelope';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

/**
 * The conformance vectors every producer runs (docs/wire-format.md): inputs in
 * clients/conformance/inputs.json, what Node stores for them in vectors.json.
 * This suite holds Node to vectors.json; clients/python/tests/test_conformance.py
 * holds the Python producer to the same file, so neither can drift. After a
 * deliberate change of the format: UPDATE_VECTORS=1 npx vitest run test/conformance.test.ts.
 */
const DIR = join(__dirname, '..', 'clients', 'conformance');
interface Input {
  name: string;
  type: string;
  id: string;
  payload: Record<string, unknown>;
  context?: Record<string, string>;
  version?: number;
  partitions?: number;
  delay_ms?: number;
  at?: boolean;
  replace?: boolean;
  options?: Record<string, unknown>;
  error?: string;
  /** Only one producer can make this mistake. */
  only?: 'python';
}
interface Inputs {
  wireFormat: number;
  prefix: string;
  enqueuedAt: number;
  atMs: number;
  accepted: Input[];
  refused: Input[];
}
interface Expected {
  body: string;
  tag: string;
  mode: string;
  modeMs: number;
  due: string;
  keys: Record<string, string>;
}
const inputs = JSON.parse(readFileSync(join(DIR, 'inputs.json'), 'utf8')) as Inputs;

/** snake_case options (the vectors', as Python takes them) in Node's camelCase. */
function camel(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()), camel(v)]));
}

/** A payload with `{ "$date": iso }` as the Date it stands for. */
function revive(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(revive);
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    if (typeof record.$date === 'string' && Object.keys(record).length === 1) return new Date(record.$date);
    return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, revive(v)]));
  }
  return value;
}

const classes = new Map<string, new () => DelayedEventInstance>();
/** The class a Node producer of the vector's type would declare. */
function classOf(input: Input): new () => DelayedEventInstance {
  const key = `${input.type}/${input.version ?? 1}/${input.partitions ?? 1}`;
  let cls = classes.get(key);
  if (!cls) {
    cls = class {
      id = '';
    };
    const upcast = Object.fromEntries(Array.from({ length: (input.version ?? 1) - 1 }, (_, i) => [i + 1, (v: Record<string, unknown>) => v]));
    DelayedEvent(input.type, { version: input.version ?? 1, partitions: input.partitions ?? 1, upcast })(cls);
    classes.set(key, cls);
  }
  return cls;
}

function instanceOf(input: Input): DelayedEventInstance {
  return Object.assign(new (classOf(input))(), revive(input.payload) as object, { id: input.id });
}

const layout = new RedisLayout(inputs.prefix);
const KEY_NAMES = ['meta', 'schedule', 'recent', 'slotGuard', 'ready', 'inFlight', 'dead', 'errors', 'legacySchedule', 'groups', 'pending', 'errorLog', 'outcomes'] as const;

/** What Node's own encoder, window policy and layout make of a vector. */
function nodeResult(input: Input): Expected {
  const options = (camel(input.options ?? {}) ?? {}) as Record<string, unknown>;
  const delay = input.delay_ms ?? 0;
  const window = windowPolicyOf({ ...options, replace: input.replace }, 'enqueue', () => delay);
  const extras = { ...extrasOf(options, 'enqueue'), ...(window.policy.mode !== '' && window.policy.mode !== 'r' ? window.extras : {}) };
  const encoded = new EventCodec(512 * 1024).encode(instanceOf(input), input.context, inputs.enqueuedAt, extras);
  const keys = layout.forEvent({ type: input.type, partitions: input.partitions ?? 1 }, input.id);
  return {
    body: encoded.body,
    tag: keys.tag,
    mode: window.policy.mode,
    modeMs: window.policy.ms,
    due: input.at ? String(inputs.atMs) : `+${delay}`,
    keys: Object.fromEntries(KEY_NAMES.map((name) => [name, keys[name]])),
  };
}

describe('the conformance vectors (clients/conformance)', () => {
  const h = useRedis();

  it('hold what the Node encoder stores for each input', () => {
    const results = Object.fromEntries(inputs.accepted.map((input) => [input.name, nodeResult(input)]));
    const file = join(DIR, 'vectors.json');
    if (process.env.UPDATE_VECTORS === '1') writeFileSync(file, `${JSON.stringify({ wireFormat: inputs.wireFormat, generatedBy: 'test/conformance.test.ts', results }, null, 2)}\n`);
    const vectors = JSON.parse(readFileSync(file, 'utf8')) as { wireFormat: number; results: Record<string, Expected> };
    expect(vectors.wireFormat).toBe(inputs.wireFormat);
    expect(vectors.results).toEqual(results);
    // Each input means something: no two give the same body.
    expect(new Set(Object.values(results).map((r) => `${r.tag}|${r.body}|${r.mode}${r.modeMs}`)).size).toBe(inputs.accepted.length);
  });

  it('are what a Node service stores through its public enqueue', async () => {
    const vectors = JSON.parse(readFileSync(join(DIR, 'vectors.json'), 'utf8')) as { results: Record<string, Expected> };
    const service = h.service({ prefix: inputs.prefix });
    const client = h.client();
    for (const input of inputs.accepted) {
      const expected = vectors.results[input.name]!;
      const options = { ...(camel(input.options ?? {}) as object), ...(input.context ? { context: input.context } : {}), ...(input.replace ? { replace: true } : {}) };
      const event = instanceOf(input);
      const status = await service.enqueue(event, input.at ? new Date(inputs.atMs) : (input.delay_ms ?? 0), options);
      expect(status, input.name).toBe('scheduled');
      const stored = await waitFor(() => client.hget(expected.keys.meta!, input.id), `${input.name} stored`);
      const envelope = parseEnvelope(stored!);
      // The enqueued-at Node writes is its clock's: the vector's stands in for it.
      expect(envelope.body.replace(/^(\d+\|)?\[\d+,/, `$1[${inputs.enqueuedAt},`), input.name).toBe(expected.body);
      if (input.at) expect(envelope.dueAt, input.name).toBe(inputs.atMs);
    }
  });

  it('refuse what both producers refuse, storing nothing', async () => {
    const service = h.service({ prefix: inputs.prefix });
    // A payload whose own id differs is a Python mistake only: a Node event's id is its payload's.
    for (const input of inputs.refused.filter((i) => i.only !== 'python')) {
      const options = camel(input.options ?? {}) as object;
      const call = (async () => service.enqueue(instanceOf(input), input.delay_ms ?? 0, options))();
      await expect(call, input.name).rejects.toHaveProperty('name', input.error);
      expect(await service.find(classOf(input), input.id), input.name).toBeUndefined();
    }
  });
});
