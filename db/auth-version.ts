/**
 * Bumped by every write that can change who a credential belongs to or whether it still
 * works (account changes, revocations, deletions), so that lookups done per request can
 * be cached and still see a revocation on the very next request.
 */
export class AuthVersion {
  value = 0
  bump(): void {
    this.value++
  }
}
