// Settings of agentless checking: read from the environment with the rest of the
// configuration (lib/config.ts, which imports no feature), and the secret's comparison.
import crypto from 'node:crypto'

export { agentlessSettings, type AgentlessSettings } from '../config.js'

/** Constant-time comparison of a presented enrollment secret (digests: equal lengths, nothing learnt from timing). */
export function secretMatches(given: string, expected: string): boolean {
  const digest = (s: string) => crypto.createHash('sha256').update(s).digest()
  return crypto.timingSafeEqual(digest(given), digest(expected))
}
