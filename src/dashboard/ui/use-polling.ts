import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface Polled<T> {
  readonly value: T | undefined;
  readonly error: string | undefined;
  /** Reads again now (after an action), without waiting for the next tick. */
  readonly refresh: () => void;
}

/** `read()` now and every `intervalMs` while mounted, again whenever `key` changes; answers that arrive out of order are dropped. */
export function usePolling<T>(read: () => Promise<T>, key: string, intervalMs: number): Polled<T> {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const latest = useRef(0);
  const reader = useRef(read);
  reader.current = read;

  const refresh = useCallback(() => {
    const ticket = ++latest.current;
    reader.current().then(
      (v) => {
        if (ticket !== latest.current) return;
        setValue(v);
        setError(undefined);
      },
      (e: unknown) => {
        if (ticket === latest.current) setError(e instanceof Error ? e.message : String(e));
      },
    );
  }, []);

  useEffect(() => {
    setValue(undefined);
    refresh();
    const timer = setInterval(refresh, intervalMs);
    return () => clearInterval(timer);
  }, [key, intervalMs]);

  return { value, error, refresh };
}
