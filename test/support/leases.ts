/** An in-flight score as lua/includes/lease.lua writes it: lease expiry and the attempt it fences. */
export function leaseScore(expiresAtMs: number, attempt: number): number {
  return expiresAtMs * 1_000 + (attempt % 1_000);
}
