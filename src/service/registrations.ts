/**
 * The handlers registered on an instance, by `<type>|<group>`, with the ones of
 * each type indexed apart: a type's dispatcher asks for its type's groups at
 * each look, and its repartitioner whether one of them has limits. Found by a
 * pass over every handler, those answers cost each look O(handled types): with
 * 10,000 types idle, most of the process's CPU (benchmarks/MANY-TYPES-RESULTS.md).
 */
export class Registrations<R extends { readonly type: string; readonly group: string }> {
  private readonly byKey = new Map<string, R>();
  /** Exact-size arrays, replaced on change: most types have one handler, and a Map each cost every idle type. */
  private readonly byType = new Map<string, readonly R[]>();

  get(key: string): R | undefined {
    return this.byKey.get(key);
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  set(key: string, registration: R): void {
    const before = this.byKey.get(key);
    if (before?.type !== registration.type) this.delete(key);
    this.byKey.set(key, registration);
    const ofType = this.byType.get(registration.type) ?? [];
    this.byType.set(registration.type, before && ofType.includes(before) ? ofType.map((r) => (r === before ? registration : r)) : [...ofType, registration]);
  }

  delete(key: string): void {
    const registration = this.byKey.get(key);
    if (!registration) return;
    this.byKey.delete(key);
    const ofType = (this.byType.get(registration.type) ?? []).filter((r) => r !== registration);
    if (ofType.length === 0) this.byType.delete(registration.type);
    else this.byType.set(registration.type, ofType);
  }

  clear(): void {
    this.byKey.clear();
    this.byType.clear();
  }

  get size(): number {
    return this.byKey.size;
  }

  values(): IterableIterator<R> {
    return this.byKey.values();
  }

  /** The registrations of `type`, in the order they were made. */
  ofType(type: string): R[] {
    return [...(this.byType.get(type) ?? [])];
  }

  /** The groups `type` is handled in here. */
  groupsOf(type: string): string[] {
    return this.ofType(type).map((r) => r.group);
  }
}
