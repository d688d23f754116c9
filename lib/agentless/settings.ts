// Settings of agentless checking, from the environment (each with a safe default).
import crypto from 'node:crypto'

export interface AgentlessSettings {
  /** What pollers present to register; null: registration is disabled. */
  enrollmentSecret: string | null
  heartbeatSeconds: number
  /** A poller without a heartbeat for this long is Offline (three heartbeats). */
  offlineAfterSeconds: number
  /** Polling options of connections that do not override them. */
  defaultIntervalSeconds: number
  defaultTimeoutSeconds: number
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer from ${min} to ${max}, got "${raw}"`)
  return n
}

export function agentlessSettings(env: NodeJS.ProcessEnv = process.env): AgentlessSettings {
  const secret = env.PRIME_POLLER_ENROLLMENT_SECRET || null
  if (secret !== null && (secret.length < 16 || secret.length > 256)) throw new Error('PRIME_POLLER_ENROLLMENT_SECRET must have 16 to 256 characters')
  const heartbeatSeconds = int(env, 'PRIME_POLLER_HEARTBEAT_SECONDS', 60, 1, 3600)
  const defaultIntervalSeconds = int(env, 'PRIME_AGENTLESS_INTERVAL_SECONDS', 300, 60, 86400)
  const defaultTimeoutSeconds = int(env, 'PRIME_AGENTLESS_TIMEOUT_SECONDS', 10, 1, 300)
  if (defaultTimeoutSeconds >= defaultIntervalSeconds) throw new Error('PRIME_AGENTLESS_TIMEOUT_SECONDS must be below PRIME_AGENTLESS_INTERVAL_SECONDS')
  return { enrollmentSecret: secret, heartbeatSeconds, offlineAfterSeconds: heartbeatSeconds * 3, defaultIntervalSeconds, defaultTimeoutSeconds }
}

/** Constant-time comparison of a presented enrollment secret (digests: equal lengths, nothing learnt from timing). */
export function secretMatches(given: string, expected: string): boolean {
  const digest = (s: string) => crypto.createHash('sha256').update(s).digest()
  return crypto.timingSafeEqual(digest(given), digest(expected))
}
