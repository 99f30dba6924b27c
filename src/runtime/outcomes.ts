/**
 * What became of a handler call, once its result was written: the one table
 * the `outcome` of metrics (`handled`, `handler_duration`), Prometheus,
 * OpenTelemetry spans and the activity charts use (docs/api.md, "Outcomes").
 *
 * - `success`: the handler succeeded; the event is complete.
 * - `failure`: it failed; the event is retried or dead-lettered.
 * - `snoozed`: it snoozed the event (`delivery.snooze`, `Snoozed`); no attempt spent.
 * - `rate-limited`: it said its provider rate-limited it; no attempt spent, the queue held.
 * - `stale`: its result was fenced off: the event was cancelled, replaced or
 *   delivered again (its lease expired) while the call ran; nothing was written.
 */
export const HANDLED_OUTCOMES = ['success', 'failure', 'snoozed', 'rate-limited', 'stale'] as const;

export type HandledOutcome = (typeof HANDLED_OUTCOMES)[number];
