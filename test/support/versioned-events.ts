import 'reflect-metadata';
import { DelayedEvent } from '../../src';

/**
 * One event type, 'test.versioned', as three deploys of an app wrote it:
 * v1 kept `amount`, v2 renamed it `amountCents`, v3 nested it in `money`.
 * Each class reads the versions before it through its upcasters; `cents()`
 * is what a handler of any version reports, so tests compare across them.
 */
export const VERSIONED_TYPE = 'test.versioned';

@DelayedEvent(VERSIONED_TYPE)
export class OrderCheckV1 {
  constructor(
    readonly id: string = '',
    readonly amount: number = 0,
  ) {}

  cents(): number {
    return this.amount;
  }
}

const v1ToV2 = ({ amount, ...rest }: Record<string, unknown>) => ({ ...rest, amountCents: amount });
const v2ToV3 = ({ amountCents, ...rest }: Record<string, unknown>) => {
  if (typeof amountCents !== 'number') throw new Error(`amountCents must be a number, got ${JSON.stringify(amountCents)}`);
  return { ...rest, money: { cents: amountCents, currency: 'EUR' } };
};

@DelayedEvent(VERSIONED_TYPE, { version: 2, upcast: { 1: v1ToV2 } })
export class OrderCheckV2 {
  constructor(
    readonly id: string = '',
    readonly amountCents: number = 0,
  ) {}

  cents(): number {
    return this.amountCents;
  }
}

@DelayedEvent(VERSIONED_TYPE, { version: 3, upcast: { 1: v1ToV2, 2: v2ToV3 } })
export class OrderCheckV3 {
  constructor(
    readonly id: string = '',
    readonly money: { cents: number; currency: string } = { cents: 0, currency: 'EUR' },
  ) {}

  cents(): number {
    return this.money.cents;
  }
}

/** A v3 deploy that forgot its upcasters: it cannot read what v1 and v2 stored. */
@DelayedEvent(VERSIONED_TYPE, { version: 3 })
export class OrderCheckV3Broken {
  constructor(
    readonly id: string = '',
    readonly money: { cents: number; currency: string } = { cents: 0, currency: 'EUR' },
  ) {}

  cents(): number {
    return this.money.cents;
  }
}

export const VERSIONS = { 1: OrderCheckV1, 2: OrderCheckV2, 3: OrderCheckV3 } as const;

/** An event of `version` worth `cents`, as that deploy would build it. */
export function orderCheck(version: 1 | 2 | 3, id: string, cents: number): OrderCheckV1 | OrderCheckV2 | OrderCheckV3 {
  if (version === 1) return new OrderCheckV1(id, cents);
  if (version === 2) return new OrderCheckV2(id, cents);
  return new OrderCheckV3(id, { cents, currency: 'EUR' });
}
