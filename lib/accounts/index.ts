// The accounts' wiring: at first start, an Administrator account to log in with.
import crypto from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { dummyHash, hashPassword, passwordProblem } from '../passwords.js'
import { userAsset } from './views.js'

const ADMINISTRATOR = 30

/** First start: an `admin` account with PRIME_ADMIN_PASSWORD, or a random password logged once. */
export async function bootstrapAdmin(app: FastifyInstance) {
  const { uow, audit: auditRecords } = app.storage
  const users = app.storage.ports!.users
  // Made now, so that the first login with an unknown name does not take a second scrypt run.
  await dummyHash()
  if ((await users.counts()).total > 0) return
  let password = app.config.adminPassword
  if (password) {
    const reason = passwordProblem(password, 'admin')
    if (reason) throw new Error(`PRIME_ADMIN_PASSWORD ${reason}`)
  } else {
    password = crypto.randomBytes(15).toString('base64url')
  }
  const now = Date.now()
  const hash = await hashPassword(password)
  const created = await uow
    .run(async () => {
      if ((await users.counts()).total > 0) return false
      const id = await users.insert(
        { user_name: 'admin', email: 'admin@prime.local', first_name: null, last_name: null, phone: null, image: null, profile: ADMINISTRATOR, password_hash: hash, is_active: 1 },
        now,
      )
      await auditRecords.insert({
        createdMs: now,
        severity: 5,
        category: 'Users',
        user: null,
        sourceIp: null,
        operationId: null,
        outcome: 'Succeeded',
        description: 'Created the first Administrator account "admin" at first start',
        details: JSON.stringify({ userName: 'admin', userProfile: ADMINISTRATOR, passwordFrom: app.config.adminPassword ? 'PRIME_ADMIN_PASSWORD' : 'generated' }),
        asset: userAsset({ id, user_name: 'admin' }),
      })
      return true
    })
    .catch(async (err) => {
      // Several nodes starting together on one new database: one of them makes the account.
      if ((await users.counts()).total > 0) return false
      throw err
    })
  if (!created) return
  if (!app.config.adminPassword) {
    // Printed once, on the one start that creates the account; it is not kept anywhere.
    app.log.warn(`Created account "admin" with the generated password: ${password}  (change it with admin/updateuserdetails)`)
  } else {
    app.log.info('Created account "admin" with PRIME_ADMIN_PASSWORD')
  }
}
