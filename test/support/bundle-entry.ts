// Bundled by test/bundle.test.ts the way a bundler that prefers `module` would
// (class-transformer's esm5 build for the decorators, its cjs registry for the
// fast path), then run: prints what the codec stores for a decorated event.
import 'reflect-metadata';
import { Exclude, Expose } from 'class-transformer';
import { DelayedEvent } from '../../src';
import { EventCodec } from '../../src/core/event-codec';
import { REGISTRY_SHARED } from '../../src/core/flat-payload';

@DelayedEvent('bundle.decorated')
class Decorated {
  @Exclude() secret = 'never stored';
  @Expose({ name: 'total' }) amount = 7;
  constructor(readonly id: string = 'd1') {}
}

const codec = new EventCodec(1_000_000);
const { body } = codec.encode(new Decorated(), undefined, 0);
process.stdout.write(JSON.stringify({ registryShared: REGISTRY_SHARED, body: JSON.parse(body) }));
