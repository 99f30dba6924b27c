/**
 * The handlers registered on an instance, by `<type>|<group>`, with the ones of
 * each type indexed apart: a type's dispatcher asks for its type's groups at
 * each look, and its repartitioner whether one of them has limits. Found by a
 * pass over every handler, those answers cost each look O(handled types): with
 * 10,000 types idle, most of the process's CPU (benchmarks/MANY-TYPES-RESULTS.md).
 */
export class Registrations<R extends { readonly type: string; readonly group: string }> {
  private readonly byKey = new Map<string, R>();
  private readonly byType = new Map<string, Map<string, R>>();

  get(key: string): R | undefined {
    return this.byKey.get(key);
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  set(key: string, registration: R): void {
    if (this.byKey.get(key)?.type !== registration.type) this.delete(key);
    this.byKey.set(key, registration);
    let ofType = this.byType.get(registration.type);
    if (!ofType) this.byType.set(registration.type, (ofType = new Map()));
    ofType.set(key, registration);
  }

  delete(key: string): void {
    const registration = this.byKey.get(key);
    if (!registration) return;
    this.byKey.delete(key);
    const ofType = this.byType.get(registration.type);
    ofType?.delete(key);
    if (ofType?.size === 0) this.byType.delete(registration.type);
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
    const ofType = this.byType.get(type);
    return ofType ? [...ofType.values()] : [];
  }

  /** The groups `type` is handled in here. */
  groupsOf(type: string): string[] {
    return this.ofType(type).map((r) => r.group);
  }
}
