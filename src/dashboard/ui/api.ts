// The dashboard's JSON API as the page sees it (src/dashboard/dashboard-api.ts serves it): dates arrive as ISO strings.

export type EventState = 'scheduled' | 'ready' | 'in-flight' | 'dead' | 'handled' | 'waiting';
export const STATES: readonly EventState[] = ['scheduled', 'ready', 'in-flight', 'dead', 'handled', 'waiting'];

export interface StateCounts {
  readonly scheduled: number;
  readonly ready: number;
  readonly inFlight: number;
  readonly dead: number;
  /** Since 0.6: parents waiting for their children. */
  readonly waiting?: number;
  readonly oldestReadyMs?: number;
}

export interface TypeOverview {
  readonly type: string;
  readonly partitions: number;
  readonly groups: readonly string[];
  readonly paused: boolean;
  readonly schedules?: number;
  readonly counts: StateCounts & { readonly groups?: Readonly<Record<string, StateCounts>> };
}

export interface Overview {
  readonly prefix: string;
  readonly at: string;
  readonly readOnly: boolean;
  readonly types: readonly TypeOverview[];
}

export interface InspectedEvent {
  readonly id: string;
  readonly state: EventState;
  readonly dueAt: string;
  readonly attempt: number;
  /** Since 0.6; absent from an older server. */
  readonly priority?: number;
  readonly maxAttempts?: number;
  readonly snoozes?: number;
  readonly enqueuedAt?: string;
  readonly context: Readonly<Record<string, unknown>>;
  readonly lastError?: string;
  readonly event?: unknown;
  readonly decodeError?: string;
  readonly leaseExpiresAt?: string;
  readonly deadLetteredAt?: string;
  readonly handledAt?: string;
  readonly errors?: ReadonlyArray<{ readonly attempt: number; readonly at: string; readonly message: string }>;
  readonly groups?: Readonly<Record<string, EventState>>;
  /** Since 0.6, the event page's: what its current attempt reported, and its calls' log lines. */
  readonly progress?: unknown;
  readonly logs?: ReadonlyArray<{ readonly at: string; readonly attempt: number; readonly line: string }>;
  readonly result?: unknown;
  /** Since 0.6, the event page's: why it has not run (explain()). */
  readonly explanation?: {
    readonly text: string;
    readonly gate: string;
    readonly groups: ReadonlyArray<{ readonly group: string; readonly gate: string; readonly text: string }>;
  };
}

export interface Instance {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: string;
  readonly lastSeen: string;
  readonly handlers: ReadonlyArray<{ readonly type: string; readonly group: string; readonly parallelism: number; readonly running: number }>;
}

export interface ActivitySlot {
  readonly at: string;
  readonly enqueued: number;
  readonly handled: number;
  readonly failed: number;
  readonly deadLettered: number;
  readonly latenessP50Ms?: number;
  readonly latenessP99Ms?: number;
}

export interface DueTimeline {
  readonly overdue: number;
  readonly slots: ReadonlyArray<{ readonly from: string; readonly to: string; readonly count: number }>;
  readonly partial: boolean;
}

/** A group's flow limits and their use now (Inspector.limits). */
export interface LimitUse {
  readonly rate?: { readonly max: number; readonly perMs: number };
  readonly concurrency?: number;
  readonly started?: number;
  readonly running: number;
  readonly heldForMs?: number;
  readonly perKey?: { readonly rate?: { readonly max: number; readonly perMs: number }; readonly concurrency?: number };
  readonly keysWaiting?: number;
  /** Since 0.6: the busiest keys, each with its events waiting and calls running. */
  readonly keys?: ReadonlyArray<{ readonly key: string; readonly waiting: number; readonly running: number }>;
}

export interface RecurringSchedule {
  readonly type: string;
  readonly name: string;
  readonly spec: { readonly every: number } | { readonly cron: string; readonly tz: string };
  readonly next?: string;
  readonly last?: string;
  readonly catchUp: string;
  /** Since 0.6: the policy, what was skipped, a pause, what is left under a limit. */
  readonly overlap?: string;
  readonly catchUpWindowMs?: number;
  readonly limit?: number;
  readonly immediately?: boolean;
  readonly jitterMs?: number;
  readonly pauseOnFailure?: boolean;
  readonly skipped?: number;
  readonly paused?: boolean;
  readonly pausedReason?: string;
  readonly remaining?: number;
  readonly waiting?: string;
}

/** An answer other than 2xx, with the server's message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function answer<T>(response: Response): Promise<T> {
  const body = (await response.json().catch(() => ({}))) as { error?: { message?: string } };
  if (!response.ok) throw new ApiError(response.status, body.error?.message ?? `${response.status} ${response.statusText}`);
  return body as T;
}

const typePath = (type: string) => `api/types/${encodeURIComponent(type)}`;

export function get<T>(path: string): Promise<T> {
  return fetch(path, { headers: { accept: 'application/json' } }).then((r) => answer<T>(r));
}

/** Actions: same-origin POSTs with a JSON body and the header the server requires of them. */
export function post<T>(path: string, body: unknown = {}): Promise<T> {
  return fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-delayed-events-action': '1', accept: 'application/json' },
    body: JSON.stringify(body),
  }).then((r) => answer<T>(r));
}

export const api = {
  events: (type: string, state: EventState, page: { offset: number; limit: number; group?: string }) =>
    get<{ events: InspectedEvent[] }>(`${typePath(type)}/events?state=${state}&offset=${page.offset}&limit=${page.limit}${page.group ? `&group=${encodeURIComponent(page.group)}` : ''}`),
  search: (type: string, id: string) => get<{ events: InspectedEvent[] }>(`${typePath(type)}/events?id=${encodeURIComponent(id)}`),
  event: (type: string, id: string) => get<InspectedEvent>(`${typePath(type)}/events/${encodeURIComponent(id)}`),
  activity: (type: string, window: string) => get<{ slots: ActivitySlot[] }>(`${typePath(type)}/activity?window=${window}`),
  timeline: (type: string, horizon: string, group?: string) => get<DueTimeline>(`${typePath(type)}/timeline?horizon=${horizon}&slots=60${group ? `&group=${encodeURIComponent(group)}` : ''}`),
  schedules: (type: string) => get<{ schedules: RecurringSchedule[] }>(`${typePath(type)}/schedules`),
  limits: (type: string) => get<{ limits: Record<string, LimitUse> }>(`${typePath(type)}/limits`),
  allSchedules: () => get<{ schedules: RecurringSchedule[] }>('api/schedules'),
  instances: () => get<{ instances: Instance[] }>('api/instances'),
  health: () => get<{ ready: boolean; redis: 'up' | 'down' }>('api/health'),
  pause: (type: string) => post(`${typePath(type)}/pause`),
  resume: (type: string) => post(`${typePath(type)}/resume`),
  cancel: (type: string, id: string) => post(`${typePath(type)}/events/${encodeURIComponent(id)}/cancel`),
  runNow: (type: string, id: string) => post(`${typePath(type)}/events/${encodeURIComponent(id)}/run-now`),
  reschedule: (type: string, id: string, delay: string) => post(`${typePath(type)}/events/${encodeURIComponent(id)}/reschedule`, { delay }),
  replay: (type: string, selection: { ids: string[] } | { all: true }, group?: string) => post<{ count: number }>(`${typePath(type)}/dead-letters/replay`, { ...selection, group }),
  purge: (type: string, selection: { ids: string[] } | { all: true }, group?: string) => post<{ count: number }>(`${typePath(type)}/dead-letters/purge`, { ...selection, group }),
  unschedule: (type: string, name: string) => post(`${typePath(type)}/schedules/${encodeURIComponent(name)}/unschedule`),
  pauseSchedule: (type: string, name: string) => post(`${typePath(type)}/schedules/${encodeURIComponent(name)}/pause`),
  resumeSchedule: (type: string, name: string) => post(`${typePath(type)}/schedules/${encodeURIComponent(name)}/resume`),
  drain: (type: string, group?: string) => post<{ count: number }>(`${typePath(type)}/drain`, { group }),
  clean: (type: string, olderThan: string, group?: string) => post<{ count: number }>(`${typePath(type)}/clean`, { state: 'dead', olderThan, group }),
  obliterate: (type: string, force: boolean) => post<{ obliterated: boolean }>(`${typePath(type)}/obliterate`, { force }),
};
