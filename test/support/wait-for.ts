export type Truthy<T> = Exclude<T, false | null | undefined | 0 | ''>;

/** Polls `check` until it returns a truthy value (which it resolves to) or the time runs out. */
export async function waitFor<T>(check: () => T | Promise<T>, what: string, timeoutMs = 10_000, intervalMs = 20): Promise<Truthy<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await check();
    if (last) return last as Truthy<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
