// Integration tokens: long-lived credentials for SIEMs and automation, created by an
// Administrator's session with at most its own profile, revoked at once.
import crypto from 'node:crypto'
import type { IntegrationTokenRow, IntegrationTokenStore } from './ports.js'
import type { components } from '../../generated/openapi.js'
import { problem } from '../errors.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail, UnitOfWork } from '../platform/ports.js'
import { tokenView } from './views.js'

type Create = components['schemas']['IntegrationTokenCreate']

export interface IntegrationTokenDeps {
  tokens: IntegrationTokenStore
  uow: UnitOfWork
  audit: AuditTrail
  /** A new secret and the hash that is stored instead of it. */
  newSecret(): { token: string; hash: string }
}

/** Who creates a token: only a session can, and the token's profile is at most its own. */
export interface Creator {
  kind: 'session' | 'integration'
  id: number | string
  name: string
  profile: number
}

const tokenAsset = (t: Pick<IntegrationTokenRow, 'id' | 'name'>) => ({ key: t.id, name: t.name, type: 'IntegrationToken', detail: 'Token' })

export function integrationTokenService(deps: IntegrationTokenDeps) {
  const { tokens, uow, audit } = deps
  return {
    list: () => tokens.all(),

    /** Creates a token; answers it with its secret, which is shown this once. */
    async create(ctx: Context, creator: Creator, body: Create, now = Date.now()): Promise<{ row: IntegrationTokenRow; token: string }> {
      if (creator.kind !== 'session') throw problem('forbidden', "Integration tokens are created by an Administrator's session, not by another integration token.")
      if (body.userProfile > creator.profile) throw problem('forbidden', 'A token cannot have a higher profile than its creator.')
      const expires = body.expiresAt ? Date.parse(body.expiresAt) : null
      if (expires !== null && expires <= now) throw problem('validation', 'expiresAt must be in the future.', { errors: [{ location: 'body', name: 'expiresAt', reason: 'must be in the future' }] })
      const { token, hash } = deps.newSecret()
      // A name taken by a concurrent unit after the check: refused by a database server's
      // unique index (code `duplicate-name`), answered as the check would have answered.
      const taken = (err: unknown) => {
        if ((err as { code?: string }).code === 'duplicate-name') throw problem('conflict', `An integration token named "${body.name}" already exists.`)
        throw err
      }
      const row = await uow
        .run(async () => {
          if (await tokens.byName(body.name)) throw problem('conflict', `An integration token named "${body.name}" already exists.`)
          const id = crypto.randomUUID()
          await tokens.insert({
            id,
            name: body.name,
            token_hash: hash,
            profile: body.userProfile,
            created_by: creator.name,
            created_by_user_id: creator.id as number,
            created_ms: now,
            expires_ms: expires,
          })
          const created = (await tokens.byId(id))!
          await audit.record(ctx, { description: `Created integration token "${body.name}" with profile ${body.userProfile}`, details: tokenView(created), asset: tokenAsset(created) })
          return created
        })
        .catch(taken)
      return { row, token }
    },

    /** Revokes an active token: it stops working at once, and its open notification streams end. */
    async revoke(ctx: Context, id: string, now = Date.now()): Promise<IntegrationTokenRow> {
      return uow.run(async () => {
        const row = await tokens.byId(id)
        if (!row || !(await tokens.revoke(row.id, now))) throw problem('not-found', `No active integration token ${id}.`)
        await audit.record(ctx, { description: `Revoked integration token "${row.name}"`, asset: tokenAsset(row) })
        return (await tokens.byId(row.id))!
      })
    },
  }
}

export type IntegrationTokenService = ReturnType<typeof integrationTokenService>
