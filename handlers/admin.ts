import fs from 'node:fs'
import path from 'node:path'
import { bearerToken } from '../lib/auth.js'
import { contextOf } from '../lib/platform/context.js'
import { runHealthChecks } from '../lib/health.js'
import { problem } from '../lib/errors.js'
import { projectRoot } from '../lib/paths.js'
import type { Services } from '../lib/services.js'
import type { Handlers } from './types.js'

const version: string = JSON.parse(fs.readFileSync(path.join(projectRoot, 'package.json'), 'utf8')).version
const profileNames = { 10: 'User', 20: 'Manager', 30: 'Administrator' } as const

export const adminHandlers: Handlers<
  'getAllUsers' | 'getSubsystemHealth' | 'getSystemStatus' | 'getCaches' | 'getUserDetails' | 'getProfile' | 'getPrimeVersion' | 'addUser' | 'deleteUsers' | 'updateUser' | 'updateUserDetails'
> = {
  // The account answers are kept as JSON text until an account changes (users.memo): every
  // console page reads them, and writing 100 accounts out again each time was most of the work.
  async getAllUsers(req, reply) {
    return reply.type('application/json').send(await req.server.services.accounts.listJson())
  },

  async getSubsystemHealth(req) {
    return runHealthChecks(req.server)
  },

  async getSystemStatus(req) {
    return req.server.services.system.status()
  },

  /** This node's caches (lib/platform/cache.ts) and their counts. */
  async getCaches(req) {
    const { caches } = req.server
    return { on: caches.on, bytes: caches.bytes, maxBytes: Number.isFinite(caches.maxBytes) ? caches.maxBytes : null, caches: caches.stats() }
  },

  async getUserDetails(req, reply) {
    const principal = req.principal!
    if (principal.kind !== 'session') throw problem('not-found', 'An integration token has no account of its own.')
    const view = await req.server.services.accounts.ownJson(principal.id as number)
    if (!view) throw problem('not-found', 'Your account no longer exists.')
    return reply.type('application/json').send(view)
  },

  async getProfile(req) {
    const principal = req.principal!
    const allowed = [...req.server.contract.operations.values()]
      .filter((op) => op.access.kind === 'public' || (op.access.kind === 'user' && op.access.minProfile <= principal.profile && !(op.noIntegrationToken && principal.kind === 'integration')))
      .map((op) => op.operationId)
    return {
      userName: principal.name,
      userProfile: principal.profile as 10 | 20 | 30,
      profileName: profileNames[principal.profile as 10 | 20 | 30],
      tokenKind: principal.kind,
      allowedOperations: allowed,
    }
  },

  async getPrimeVersion(req) {
    const spec = req.server.contract.spec
    return { version, build: req.server.config.build, contractVersion: spec.info.version, apiTitle: spec.info.title }
  },

  async addUser(req) {
    return req.server.services.accounts.create(contextOf(req), req.body as Parameters<Services['accounts']['create']>[1])
  },

  async deleteUsers(req) {
    return req.server.services.accounts.remove(contextOf(req), req.principal!, req.body)
  },

  async updateUser(req) {
    return req.server.services.accounts.update(contextOf(req), req.body)
  },

  async updateUserDetails(req) {
    const { services, tokens } = req.server
    return services.accounts.updateOwn(contextOf(req), req.principal!, req.body, (now) => tokens.authenticate(bearerToken(req), now))
  },
}
