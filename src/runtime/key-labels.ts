/** The label a key gets beyond the keys that have their own: label cardinality stays bounded. */
export const OTHER_KEYS = '(other)';

/**
 * Per-key metric labels (HandlerOptions.keyMetrics, since 0.6): the first
 * `most` distinct keys seen get a label of their own, every later one
 * OTHER_KEYS, so a metrics backend sees at most `most + 1` series per metric
 * and group. The key comes from the handler's key option, which may throw
 * anything: such an event is labelled '' (as it is sorted under '').
 */
export class KeyLabels<T> {
  private readonly labelled = new Set<string>();

  constructor(
    private readonly keyOf: (event: T) => string,
    private readonly most: number,
  ) {}

  of(event: T): string {
    let key: unknown;
    try {
      key = this.keyOf(event);
    } catch {
      key = '';
    }
    const label = typeof key === 'string' ? key : '';
    if (this.labelled.has(label)) return label;
    if (this.labelled.size >= this.most) return OTHER_KEYS;
    this.labelled.add(label);
    return label;
  }
}
