// Integration tokens as the contract shows them (never their secret or its hash).
import type { IntegrationTokenRow } from './ports.js'
import type { components } from '../../generated/openapi.js'
import { iso } from '../time.js'

export const tokenView = (t: IntegrationTokenRow): components['schemas']['IntegrationToken'] => ({
  id: t.id,
  name: t.name,
  userProfile: t.profile as 10 | 20 | 30,
  createdBy: t.created_by,
  createdTime: iso(t.created_ms),
  expiresAt: t.expires_ms === null ? null : iso(t.expires_ms),
  lastUsedTime: t.last_used_ms === null ? null : iso(t.last_used_ms),
  revokedTime: t.revoked_ms === null ? null : iso(t.revoked_ms),
})
