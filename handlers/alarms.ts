// Alarm destinations: list, add or update, remove, test.
import crypto from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { DestinationRow } from '../db/alarms.js'
import type { AuditAsset } from '../db/audit.js'
import { audit } from '../lib/audit.js'
import { problem } from '../lib/errors.js'
import { iso } from '../lib/time.js'
import { allowList } from '../lib/alarms/address.js'
import { sendRecord } from '../lib/alarms/deliver.js'
import { auditForm, changes, destinationInput, destinationView, inputOf, MAX_DESTINATIONS } from '../lib/alarms/destinations.js'
import { testRecord } from '../lib/alarms/format.js'
import { SyslogConnections } from '../lib/alarms/transport.js'
import type { components } from '../generated/openapi.js'
import type { Handlers } from './types.js'

type ItemResult = components['schemas']['ItemResult']
type TestResult = components['schemas']['AlarmDestinationTestResult']

const NOT_FOUND = 'No alarm destination with this id.'
const assetDetail = { syslog: 'SyslogDestination', webhook: 'WebhookDestination', email: 'EmailDestination' } as const

const destinationAsset = (d: { id: string; name: string; type: DestinationRow['type'] }): AuditAsset => ({
  key: d.id,
  name: d.name,
  type: 'AlarmDestination',
  subType: 'None',
  detail: assetDetail[d.type],
})

function requireIds(body: unknown): string[] {
  if (!Array.isArray(body) || body.length === 0) {
    throw problem('validation', 'The body must be a non-empty array of alarm destination ids.', { errors: [{ location: 'body', name: '(root)', reason: 'must be a non-empty array of ids' }] })
  }
  return body as string[]
}

const view = (req: FastifyRequest, row: DestinationRow, now: number) => destinationView(row, req.server.repos.alarms.counts(row.id, now))

export const alarmsHandlers: Handlers<'getAlarmDests' | 'addOrUpdateAlarmDest' | 'removeAlarmDest' | 'testAlarmDests'> = {
  async getAlarmDests(req) {
    const now = Date.now()
    const data = req.server.repos.alarms.all().map((row) => view(req, row, now))
    return { recordsTotal: data.length, recordsFiltered: data.length, data }
  },

  async addOrUpdateAlarmDest(req) {
    const { db, repos, config } = req.server
    const body = req.body
    const id = body.id?.toLowerCase()
    const existing = id ? repos.alarms.byId(id) : undefined
    if (id && !existing) throw problem('not-found', `${NOT_FOUND} (${body.id})`)
    // Resolving host names takes time: done before the transaction, which checks the rest again.
    const input = await destinationInput(body, existing, allowList(config.alarms.allowedHosts, config.alarms.denyPrivate), req.server.mailer.configured())
    const now = Date.now()
    const user = req.principal?.name ?? null
    return db.transaction(() => {
      const current = id ? repos.alarms.byId(id) : undefined
      if (id && !current) throw problem('not-found', `${NOT_FOUND} (${body.id})`)
      const clash = repos.alarms.byName(input.name)
      if (clash && clash.id !== input.id) throw problem('conflict', `An alarm destination named "${clash.name}" already exists (names are case-insensitive).`)
      if (!current && repos.alarms.count() >= MAX_DESTINATIONS) throw problem('conflict', `There are already ${MAX_DESTINATIONS} alarm destinations, the most allowed; remove one first.`)
      if (current) {
        repos.alarms.update(input, now, user)
        audit(req, { description: `Alarm destination "${input.name}" updated`, details: changes(inputOf(current), input), asset: destinationAsset(input) })
      } else {
        repos.alarms.insert(input, now, user)
        audit(req, { description: `Alarm destination "${input.name}" created`, details: auditForm(input), asset: destinationAsset(input) })
      }
      return view(req, repos.alarms.byId(input.id)!, now)
    })()
  },

  async removeAlarmDest(req) {
    const ids = requireIds(req.body)
    const { db, repos } = req.server
    const now = Date.now()
    return db.transaction(() => {
      const results: ItemResult[] = []
      const removed: { id: string; name: string; type: DestinationRow['type']; cancelledDeliveries: number }[] = []
      for (const given of ids) {
        const row = repos.alarms.byId(given.toLowerCase())
        const earlier = removed.find((r) => r.id === given.toLowerCase())
        if (earlier) results.push({ id: given, status: 'done', reason: null, code: null })
        else if (!row) results.push({ id: given, status: 'failed', reason: NOT_FOUND, code: 'not-found' })
        else {
          const cancelled = repos.alarms.remove(row.id, now)
          removed.push({ id: row.id, name: row.name, type: row.type, cancelledDeliveries: cancelled })
          results.push({ id: given, status: 'done', reason: null, code: null })
        }
      }
      const failed = results.filter((r) => r.status === 'failed')
      audit(req, {
        description: removed.length ? `Alarm destinations removed: ${removed.map((r) => `"${r.name}"`).join(', ')}` : 'Removed no alarm destination',
        details: { removed, failed: failed.map((f) => ({ id: f.id, reason: f.reason })) },
        outcome: removed.length ? 'Succeeded' : 'Failed',
        asset: removed.length === 1 ? destinationAsset(removed[0]) : { type: 'AlarmDestination' },
      })
      return { succeeded: results.length - failed.length, failed: failed.length, results }
    })()
  },

  async testAlarmDests(req) {
    const ids = requireIds(req.body)
    const app = req.server
    const allow = allowList(app.config.alarms.allowedHosts, app.config.alarms.denyPrivate)
    const syslog = new SyslogConnections()
    const unique = [...new Set(ids.map((id) => id.toLowerCase()))]
    let outcomes: Map<string, TestResult>
    try {
      const tested = await Promise.all(
        unique.map(async (id): Promise<[string, TestResult]> => {
          const started = Date.now()
          const dest = app.repos.alarms.byId(id)
          if (!dest) {
            return [id, { id, name: null, type: null, status: 'failed', error: NOT_FOUND, code: 'not-found', durationMs: 0, testedTime: iso(started) }]
          }
          const t0 = performance.now()
          const ctx = { deliveryId: crypto.randomUUID(), attempt: 1, sentTime: Math.floor(started / 1000), destination: { id: dest.id, name: dest.name } }
          let sent: Awaited<ReturnType<typeof sendRecord>>
          try {
            sent = await sendRecord(app, dest, testRecord(dest.name, started), ctx, { allow, syslog, timeoutMs: app.config.alarms.timeoutMs })
          } catch (err) {
            sent = { message: undefined as never, result: { outcome: 'failed', error: (err as Error).message.slice(0, 1000), code: 'delivery-failed' } }
          }
          const ok = sent.result.outcome === 'delivered'
          // The receiver's answer goes to the log only; the caller gets the coarse outcome.
          if (!ok) req.log.warn({ destinationId: dest.id, code: sent.result.code, detail: sent.result.detail ?? sent.result.error }, 'alarm destination test failed')
          return [
            id,
            {
              id,
              name: dest.name,
              type: dest.type,
              status: ok ? 'delivered' : 'failed',
              error: ok ? null : sent.result.error,
              code: ok ? null : sent.result.code,
              durationMs: Math.min(600_000, Math.round((performance.now() - t0) * 10) / 10),
              testedTime: iso(started),
              message: sent.message as TestResult['message'],
            },
          ]
        }),
      )
      outcomes = new Map(tested)
    } finally {
      syslog.close()
    }
    const results = ids.map((given) => ({ ...outcomes.get(given.toLowerCase())!, id: given }))
    const succeeded = results.filter((r) => r.status === 'delivered').length
    const known = results.filter((r) => r.code !== 'not-found')
    audit(req, {
      description: `Alarm destinations tested: ${succeeded} of ${results.length} delivered`,
      details: { results: results.map(({ message: _, ...r }) => r) },
      outcome: known.length ? 'Succeeded' : 'Failed',
      asset: known.length === 1 ? destinationAsset({ id: known[0].id.toLowerCase(), name: known[0].name!, type: known[0].type! }) : { type: 'AlarmDestination' },
    })
    return { succeeded, failed: results.length - succeeded, results }
  },
}
