import {
  type DynamicModule,
  Inject,
  Injectable,
  type InjectionToken,
  Module,
  type ModuleMetadata,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OptionalFactoryDependency,
  type Provider,
} from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { type DelayedEventInstance, DelayedEventService, type DelayedEventServiceOptions, type EventClass, type HandlerOptions, InvalidOptionError } from '../../index';

/** Injection token of the options given to forRoot / forRootAsync. */
export const DELAYED_EVENTS_OPTIONS = Symbol.for('reactive-delayed-events:nestjs-options');
const HANDLERS = Symbol.for('reactive-delayed-events:nestjs-handlers');

export interface OnDelayedEventOptions extends HandlerOptions {
  /** Most calls of this method at once in this process; default 1. */
  readonly parallelism?: number;
}

interface HandlerDeclaration {
  readonly eventClass: EventClass;
  readonly options: OnDelayedEventOptions;
}

/** @OnDelayedEvent's options, each once (the type checker holds the list to OnDelayedEventOptions). */
const ON_DELAYED_EVENT_KEYS = {
  parallelism: true,
  keepDead: true,
  retry: true,
  timeoutMs: true,
  group: true,
  prefetch: true,
  maxSnoozes: true,
  heartbeatMs: true,
  keyMetrics: true,
  priorityAgingMs: true,
  rateLimit: true,
  globalConcurrency: true,
  key: true,
  perKey: true,
} as const satisfies Record<keyof Required<OnDelayedEventOptions>, true>;

/**
 * Declares a provider's method as the handler of `eventClass`'s events
 * (`addHandler` at application bootstrap): `(event, context, delivery)` as
 * any handler. Give each method its own `group` to have several methods of
 * the app receive every event (fan-out); two methods of one class without a
 * group is a HandlerAlreadyRegisteredError at bootstrap.
 */
export function OnDelayedEvent<T extends DelayedEventInstance>(eventClass: EventClass<T>, options: OnDelayedEventOptions = {}): MethodDecorator {
  // Checked where it is written, not at bootstrap: a misspelt option names the decorator.
  const allowed = Object.keys(ON_DELAYED_EVENT_KEYS);
  for (const key of Object.keys(options ?? {})) {
    if (!allowed.includes(key)) throw new InvalidOptionError(JSON.stringify(key), `@OnDelayedEvent has no such option; its options are ${allowed.join(', ')}`);
  }
  return (_target, _key, descriptor) => {
    const method = descriptor.value as unknown;
    if (typeof method !== 'function') throw new TypeError('@OnDelayedEvent decorates methods');
    const declared = (Reflect.getMetadata(HANDLERS, method) as HandlerDeclaration[] | undefined) ?? [];
    Reflect.defineMetadata(HANDLERS, [...declared, { eventClass, options }], method);
    return descriptor;
  };
}

export interface DelayedEventsModuleOptions extends DelayedEventServiceOptions {
  /** Registers the module globally, so every module may inject DelayedEventService; default true. */
  readonly global?: boolean;
}

export interface DelayedEventsModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  readonly useFactory: (...args: never[]) => DelayedEventServiceOptions | Promise<DelayedEventServiceOptions>;
  readonly inject?: Array<InjectionToken | OptionalFactoryDependency>;
  /** Default true. */
  readonly global?: boolean;
}

/**
 * Finds the @OnDelayedEvent methods of every provider once the application
 * has bootstrapped, registers them as handlers, and closes the service when
 * the application shuts down.
 */
@Injectable()
export class DelayedEventsExplorer implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(DelayedEventService) private readonly service: DelayedEventService,
  ) {}

  onApplicationBootstrap(): void {
    const scanner = new MetadataScanner();
    const seen = new Set<object>();
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      // Request-scoped providers have no instance to call: only static ones handle events.
      if (!instance || typeof instance !== 'object' || seen.has(instance) || !wrapper.isDependencyTreeStatic()) continue;
      seen.add(instance);
      const prototype = Object.getPrototypeOf(instance) as object | null;
      if (!prototype) continue;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const method = instance[name];
        if (typeof method !== 'function') continue;
        const declarations = Reflect.getMetadata(HANDLERS, method) as HandlerDeclaration[] | undefined;
        for (const { eventClass, options } of declarations ?? []) {
          this.service.addHandler(eventClass, (event, context, delivery) => (method as (...args: unknown[]) => never).call(instance, event, context, delivery), options);
        }
      }
    }
  }

  /** Stops taking events, waits for running handlers (closeTimeoutMs), releases the connections. */
  async onApplicationShutdown(): Promise<void> {
    await this.service.close();
  }
}

function serviceProviders(options: Provider): Provider[] {
  return [options, { provide: DelayedEventService, useFactory: (resolved: DelayedEventServiceOptions) => new DelayedEventService(resolved), inject: [DELAYED_EVENTS_OPTIONS] }, DelayedEventsExplorer];
}

/**
 * The service as a Nest module, in the way of @nestjs/bullmq:
 * `DelayedEventsModule.forRoot({ redis, prefix })` provides DelayedEventService
 * (inject it with `@Inject(DelayedEventService)`), registers the
 * `@OnDelayedEvent` methods at bootstrap, and closes the service on shutdown.
 */
@Module({})
export class DelayedEventsModule {
  static forRoot(options: DelayedEventsModuleOptions): DynamicModule {
    const { global = true, ...serviceOptions } = options;
    return {
      module: DelayedEventsModule,
      global,
      imports: [DiscoveryModule],
      providers: serviceProviders({ provide: DELAYED_EVENTS_OPTIONS, useValue: serviceOptions }),
      exports: [DelayedEventService],
    };
  }

  static forRootAsync(options: DelayedEventsModuleAsyncOptions): DynamicModule {
    const allowed: ReadonlyArray<keyof DelayedEventsModuleAsyncOptions> = ['imports', 'useFactory', 'inject', 'global'];
    for (const key of Object.keys(options)) {
      if (!(allowed as readonly string[]).includes(key))
        throw new InvalidOptionError(JSON.stringify(key), `DelayedEventsModule.forRootAsync has no such option; its options are ${allowed.join(', ')}`);
    }
    return {
      module: DelayedEventsModule,
      global: options.global ?? true,
      imports: [DiscoveryModule, ...(options.imports ?? [])],
      providers: serviceProviders({ provide: DELAYED_EVENTS_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] }),
      exports: [DelayedEventService],
    };
  }
}
