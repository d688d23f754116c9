// Alarm destinations: listing, adding or updating, removing and testing them. Takes plain
// inputs (the request's context and the parsed body), so it runs without Fastify.
import crypto from 'node:crypto'
import type { AuditAsset, AuditTrail, Log, UnitOfWork } from '../platform/ports.js'
import type { AlarmDestinationStore, DeliveryCounts, DestinationRow } from './ports.js'
import type { components } from '../../generated/openapi.js'
import { problem } from '../errors.js'
import type { Context } from '../platform/context.js'
import { iso } from '../time.js'
import type { AllowList } from './address.js'
import type { Sent, Transports } from './deliver.js'
import { auditForm, changes, destinationInput, inputOf, keepingStoredSecrets, MAX_DESTINATIONS } from './destinations.js'
import { testRecord, type AlarmRecord, type DeliveryContext } from './format.js'
import { SyslogConnections } from './transport.js'

type Body = components['schemas']['AlarmDestinationView']
type ItemResult = components['schemas']['ItemResult']
type TestResult = components['schemas']['AlarmDestinationTestResult']

export interface AlarmDestinationDeps {
  destinations: AlarmDestinationStore
  uow: UnitOfWork
  audit: AuditTrail
  log: Log
  /** The addresses destinations may reach (PRIME_ALARM_ALLOWED_HOSTS, PRIME_ALARM_DENY_PRIVATE). */
  allow: AllowList
  /** Whether outgoing mail is configured: e-mail destinations need it. */
  mailConfigured(): boolean
  /** Sends one record to one destination (lib/alarms/deliver.ts). */
  send(dest: DestinationRow, record: AlarmRecord, ctx: DeliveryContext, t: Transports): Promise<Sent>
  /** How long a receiver has to answer a test. */
  timeoutMs: number
}

/** A destination as stored, with its delivery counts: what its view is made of. */
export interface DestinationState {
  row: DestinationRow
  counts: DeliveryCounts
}

const NOT_FOUND = 'No alarm destination with this id.'
const assetDetail = { syslog: 'SyslogDestination', webhook: 'WebhookDestination', email: 'EmailDestination' } as const

const destinationAsset = (d: { id: string; name: string; type: DestinationRow['type'] }): AuditAsset => ({
  key: d.id,
  name: d.name,
  type: 'AlarmDestination',
  subType: 'None',
  detail: assetDetail[d.type],
})

export function alarmDestinationService(deps: AlarmDestinationDeps) {
  const { destinations, uow, audit } = deps
  const state = async (row: DestinationRow, now: number): Promise<DestinationState> => ({ row, counts: await destinations.counts(row.id, now) })

  return {
    async list(now = Date.now()): Promise<DestinationState[]> {
      const rows = await destinations.all()
      return Promise.all(rows.map((row) => state(row, now)))
    },

    /** Adds a destination (no id) or updates the one `body.id` names. Names are unique, case-insensitively. */
    async save(ctx: Context, body: Body): Promise<DestinationState> {
      const id = body.id?.toLowerCase()
      const existing = id ? await destinations.byId(id) : undefined
      if (id && !existing) throw problem('not-found', `${NOT_FOUND} (${body.id})`)
      // Resolving host names takes time: done before the unit of work, which checks the rest again.
      const resolved = await destinationInput(body, existing, deps.allow, deps.mailConfigured())
      const now = Date.now()
      return uow
        .run(async () => {
          // Held (PostgreSQL): the stored secrets the body keeps are written back from this
          // read, so a change committed since the read above (a new secret) must be read here,
          // and none may commit before this unit does.
          const current = id ? await destinations.byId(id, true) : undefined
          if (id && !current) throw problem('not-found', `${NOT_FOUND} (${body.id})`)
          const input = keepingStoredSecrets(body, resolved, current)
          const clash = await destinations.byName(input.name)
          if (clash && clash.id !== input.id) throw problem('conflict', `An alarm destination named "${clash.name}" already exists (names are case-insensitive).`)
          if (!current && (await destinations.count(true)) >= MAX_DESTINATIONS)
            throw problem('conflict', `There are already ${MAX_DESTINATIONS} alarm destinations, the most allowed; remove one first.`)
          if (current) {
            // Deleted by another request since it was read (PostgreSQL: between the statements).
            if ((await destinations.update(input, now, ctx.actor)) === 0) throw problem('not-found', `${NOT_FOUND} (${body.id})`)
            await audit.record(ctx, { description: `Alarm destination "${input.name}" updated`, details: changes(inputOf(current), input), asset: destinationAsset(input) })
          } else {
            await destinations.insert(input, now, ctx.actor)
            await audit.record(ctx, { description: `Alarm destination "${input.name}" created`, details: auditForm(input), asset: destinationAsset(input) })
          }
          return state((await destinations.byId(input.id))!, now)
        })
        .catch((err) => {
          // Named so by another request between the look-up and the write (PostgreSQL's
          // unique index refused this one): the conflict the look-up would have found.
          if ((err as { code?: string }).code === 'duplicate-key') throw problem('conflict', `An alarm destination named "${resolved.name}" already exists (names are case-insensitive).`)
          throw err
        })
    },

    /** Removes destinations by id (their pending deliveries are cancelled); one result per id given. */
    async remove(ctx: Context, ids: string[]) {
      const now = Date.now()
      return uow.run(async () => {
        const results: ItemResult[] = []
        const removed: { id: string; name: string; type: DestinationRow['type']; cancelledDeliveries: number }[] = []
        for (const given of ids) {
          const row = await destinations.byId(given.toLowerCase())
          const earlier = removed.find((r) => r.id === given.toLowerCase())
          if (earlier) results.push({ id: given, status: 'done', reason: null, code: null })
          else if (!row) results.push({ id: given, status: 'failed', reason: NOT_FOUND, code: 'not-found' })
          else {
            const cancelled = await destinations.remove(row.id, now)
            removed.push({ id: row.id, name: row.name, type: row.type, cancelledDeliveries: cancelled })
            results.push({ id: given, status: 'done', reason: null, code: null })
          }
        }
        const failed = results.filter((r) => r.status === 'failed')
        await audit.record(ctx, {
          description: removed.length ? `Alarm destinations removed: ${removed.map((r) => `"${r.name}"`).join(', ')}` : 'Removed no alarm destination',
          details: { removed, failed: failed.map((f) => ({ id: f.id, reason: f.reason })) },
          outcome: removed.length ? 'Succeeded' : 'Failed',
          asset: removed.length === 1 ? destinationAsset(removed[0]) : { type: 'AlarmDestination' },
        })
        return { succeeded: results.length - failed.length, failed: failed.length, results }
      })
    },

    /**
     * Sends a test record to each destination named. The caller learns only the coarse
     * outcome; what the receiver answered goes to the server log.
     */
    async test(ctx: Context, ids: string[]) {
      const syslog = new SyslogConnections()
      const unique = [...new Set(ids.map((id) => id.toLowerCase()))]
      let outcomes: Map<string, TestResult>
      try {
        const tested = await Promise.all(unique.map(async (id): Promise<[string, TestResult]> => [id, await testOne(ctx, id, syslog)]))
        outcomes = new Map(tested)
      } finally {
        syslog.close()
      }
      const results = ids.map((given) => ({ ...outcomes.get(given.toLowerCase())!, id: given }))
      const succeeded = results.filter((r) => r.status === 'delivered').length
      const known = results.filter((r) => r.code !== 'not-found')
      await audit.record(ctx, {
        description: `Alarm destinations tested: ${succeeded} of ${results.length} delivered`,
        details: { results: results.map(({ message: _, ...r }) => r) },
        outcome: known.length ? 'Succeeded' : 'Failed',
        asset: known.length === 1 ? destinationAsset({ id: known[0].id.toLowerCase(), name: known[0].name!, type: known[0].type! }) : { type: 'AlarmDestination' },
      })
      return { succeeded, failed: results.length - succeeded, results }
    },
  }

  async function testOne(ctx: Context, id: string, syslog: SyslogConnections): Promise<TestResult> {
    const started = Date.now()
    const dest = await destinations.byId(id)
    if (!dest) return { id, name: null, type: null, status: 'failed', error: NOT_FOUND, code: 'not-found', durationMs: 0, testedTime: iso(started) }
    const t0 = performance.now()
    const delivery = { deliveryId: crypto.randomUUID(), attempt: 1, sentTime: Math.floor(started / 1000), destination: { id: dest.id, name: dest.name } }
    let sent: Sent
    try {
      sent = await deps.send(dest, testRecord(dest.name, started), delivery, { allow: deps.allow, syslog, timeoutMs: deps.timeoutMs })
    } catch (err) {
      sent = { message: undefined as never, result: { outcome: 'failed', error: (err as Error).message.slice(0, 1000), code: 'delivery-failed' } }
    }
    const ok = sent.result.outcome === 'delivered'
    if (!ok) deps.log.warn({ reqId: ctx.requestId, destinationId: dest.id, code: sent.result.code, detail: sent.result.detail ?? sent.result.error }, 'alarm destination test failed')
    return {
      id,
      name: dest.name,
      type: dest.type,
      status: ok ? 'delivered' : 'failed',
      error: ok ? null : sent.result.error,
      code: ok ? null : sent.result.code,
      durationMs: Math.min(600_000, Math.round((performance.now() - t0) * 10) / 10),
      testedTime: iso(started),
      message: sent.message as TestResult['message'],
    }
  }
}

export type AlarmDestinationService = ReturnType<typeof alarmDestinationService>
