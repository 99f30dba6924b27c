/**
 * Parts by the wake-up tag they answer to (a queue's readers, a handler's
 * loops): many per tag, found without a pass over all. A tag with one part
 * (the most common: one handler per queue) holds it alone, not in a Set:
 * with 10,000 handled types, a Set per tag was a good part of an idle type's memory.
 */
export class TagIndex<T extends object> {
  private readonly byTag = new Map<string, T | Set<T>>();

  add(tag: string, part: T): void {
    const held = this.byTag.get(tag);
    if (held === undefined) this.byTag.set(tag, part);
    else if (held instanceof Set) held.add(part);
    else if (held !== part) this.byTag.set(tag, new Set([held, part]));
  }

  delete(tag: string, part: T): void {
    const held = this.byTag.get(tag);
    if (held === part) this.byTag.delete(tag);
    else if (held instanceof Set) {
      held.delete(part);
      if (held.size === 0) this.byTag.delete(tag);
    }
  }

  of(tag: string): Iterable<T> {
    const held = this.byTag.get(tag);
    return held === undefined ? [] : held instanceof Set ? [...held] : [held];
  }

  *all(): Iterable<T> {
    for (const held of this.byTag.values()) {
      if (held instanceof Set) yield* [...held];
      else yield held;
    }
  }
}
