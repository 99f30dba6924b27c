import type { DelayedEventInstance } from '../core/delayed-event.decorator';
import { type Explanation, explainStored } from '../redis/explanations';
import { checkEvent } from './inspection-checks';
import type { EventTarget } from './inspection-types';
import { OutcomeCalls } from './outcome-calls';

/** "Why has it not run?" (since 0.6): explain(). */
export abstract class ExplainCalls extends OutcomeCalls {
  /**
   * What holds an event back, in each group that holds it: not due yet, the
   * type paused, a rate limit or a hold, the concurrency limit, its key's
   * turn, a newer class version; or that it is ready, running, dead or
   * handled. Each with when it opens (`until`), when known, the figures
   * (`detail`) and a sentence (`text`). Undefined when the event is not stored
   * (nor kept by keepHandled). Read in a few calls: a snapshot.
   */
  explain<T extends DelayedEventInstance>(target: EventTarget<T>, id: string): Promise<Explanation | undefined> {
    return this.bounded(
      'explain',
      () => checkEvent(target, id),
      async (type) => {
        const resolved = await this.resolve(target);
        const keys = resolved && (await this.queueOf(resolved, id));
        const stored = keys && (await this.stored.read(keys, id));
        if (!keys || !stored) return undefined;
        const groups = await explainStored(this.parts.client, this.parts.layout, keys, stored);
        const first = groups.find((g) => g.group === 'default') ?? groups[0]!;
        return { id, type, ...first, groups };
      },
    );
  }
}
