import { describe, expect, it } from 'vitest';
import { Registrations } from '../src/service/registrations';

// A type's dispatcher asks for its type's groups at every look: the index must answer for that type alone, and stay
// right as handlers come and go (a group left out would not be registered again after a data loss).
describe('the handlers registered on an instance', () => {
  const entry = (type: string, group: string) => ({ type, group });

  it("answers a type's groups and registrations from its own entries, through additions and removals", () => {
    const registrations = new Registrations<{ type: string; group: string }>();
    registrations.set('a|default', entry('a', 'default'));
    registrations.set('b|default', entry('b', 'default'));
    registrations.set('a|audit', entry('a', 'audit'));
    expect(registrations.groupsOf('a')).toEqual(['default', 'audit']);
    expect(registrations.groupsOf('b')).toEqual(['default']);
    expect(registrations.groupsOf('c')).toEqual([]);
    expect(registrations.size).toBe(3);

    registrations.delete('a|default');
    expect(registrations.groupsOf('a')).toEqual(['audit']);
    expect(registrations.has('a|default')).toBe(false);
    registrations.delete('a|audit');
    expect(registrations.ofType('a')).toEqual([]);
    expect([...registrations.values()]).toEqual([entry('b', 'default')]);

    registrations.clear();
    expect(registrations.size).toBe(0);
    expect(registrations.groupsOf('b')).toEqual([]);
  });
});
