import 'reflect-metadata';
import { Type } from 'class-transformer';
import { DelayedEvent } from '../../src';

@DelayedEvent('test.payment-check')
export class PaymentCheck {
  constructor(
    readonly id: string = '',
    readonly amount: number = 0,
  ) {}
}

export class Address {
  constructor(
    readonly city: string = '',
    readonly zip: string = '',
  ) {}

  label(): string {
    return `${this.zip} ${this.city}`;
  }
}

@DelayedEvent('test.reminder')
export class Reminder {
  @Type(() => Address)
  address: Address = new Address();

  @Type(() => Date)
  remindAt: Date = new Date(0);

  tags: string[] = [];

  constructor(readonly id: string = '') {}
}

@DelayedEvent('test.work')
export class WorkItem {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
  ) {}
}
