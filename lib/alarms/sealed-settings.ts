// Webhook secrets and custom header values at rest: sealed with the data dir's key (the
// one that seals agentless credentials, lib/vault.ts), bound to the destination, so that
// a copied database file alone reveals none of them. The rest of the settings stays
// readable JSON. Settings stored before sealing (plain `secret` and `headers`) still read,
// and are sealed at the next start (the alarms repo's sealStored).
import type { SettingsSealer } from './ports.js'
import type { Vault } from '../vault.js'

const SECRET_KEYS = ['secret', 'headers'] as const

export function settingsSealer(v: Vault): SettingsSealer {
  const context = (id: string) => `alarm:${id}`
  return {
    seal(settings: object, id: string): string {
      const s = { ...(settings as Record<string, unknown>) }
      if (!SECRET_KEYS.some((k) => k in s)) return JSON.stringify(s)
      const secrets = Object.fromEntries(SECRET_KEYS.filter((k) => k in s).map((k) => [k, s[k]]))
      for (const k of SECRET_KEYS) delete s[k]
      return JSON.stringify({ ...s, sealed: v.sealValue(secrets, context(id)).toString('base64') })
    },
    open(stored: string, id: string): string {
      const { sealed, ...rest } = JSON.parse(stored) as Record<string, unknown>
      if (typeof sealed !== 'string') return stored
      try {
        return JSON.stringify({ ...rest, ...(v.openValue(Buffer.from(sealed, 'base64'), context(id)) as object) })
      } catch {
        // Another key (PRIME_AGENTLESS_KEY changed, or the key file lost): nothing to send with.
        return JSON.stringify({ ...rest, secret: null, headers: {}, unsealable: true })
      }
    },
    isPlain: (stored: string): boolean => {
      const s = JSON.parse(stored) as Record<string, unknown>
      return typeof s.sealed !== 'string' && SECRET_KEYS.some((k) => k in s)
    },
  }
}
