// The agent gateway: enrollment, check-ins and command results. A check-in carries the
// agent's whole state; the server records what changed since the last one as events.
// Takes plain inputs (the caller's context, the agent its credential named, the parsed
// body), so it runs without Fastify.
import crypto from 'node:crypto'
import type { components } from '../../generated/openapi.js'
import { AGENT_PREFIX, unauthenticated } from '../auth.js'
import type { Config } from '../config.js'
import { invalidField, problem, type FieldError } from '../errors.js'
import { newSecret, sha256 } from '../passwords.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail, Log, UnitOfWork } from '../platform/ports.js'
import { iso } from '../time.js'
import { agentAsset, maskMachineId } from '../agents/views.js'
import { type AgentRef, hostEvent, modeEvent, presenceEvents, removedEvent, unapprovedEvent } from './events.js'
import { DAY_MS, gatewayLimits } from './limits.js'
import { modelTooltip, nicsText, reconcile, storedView } from './peripherals.js'
import type { AgentRow, AgentState, AgentStatus, EventBatch, EventInput, EventRecorder, GatewayAgent, GatewayStore, PresentPeripheral } from './ports.js'
import { gatewayCommandView } from './views.js'

type Schemas = components['schemas']
type CheckIn = Schemas['GatewayCheckInRequest']
type ItemResult = Schemas['ItemResult']

const MAX_COMMANDS = 50
const MORE_COMMANDS_CHECK_IN_SECONDS = 5
const MAX_PERIPHERALS_PER_AGENT = 2048
const DEBUG_LOGS_KEPT = 5
const HEARTBEAT_FLUSH_MS = 1000
export const NO_RESULT = 'No result reported'
const MAX_LISTED_REFUSALS = 20
/** Reported errors stored per agent per UTC day; more are answered but not stored. */
export const MAX_ERRORS_PER_AGENT_PER_DAY = 1000

interface Change {
  from: unknown
  to: unknown
}

export interface GatewayDeps {
  store: GatewayStore
  events: EventRecorder
  agentState: AgentStatus
  uow: UnitOfWork
  /** The unit of work of check-ins and command results (a shared commit: PRIME_GROUP_COMMIT); `uow` without it. */
  checkIns?: UnitOfWork
  /**
   * Check-ins that arrive in the same turn of the event loop are compared and written together,
   * in one transaction of `uow` with a few statements for all of them (PRIME_GROUP_COMMIT).
   */
  batchCheckIns?: boolean
  audit: AuditTrail
  log: Log
  settings: Pick<Config, 'license' | 'rateLimitWindowMs'> & {
    agents: Pick<Config['agents'], 'enrollmentSecret' | 'checkInSeconds' | 'minCheckInSeconds' | 'enrollPerMinutePerAddress' | 'enrollPerMinute' | 'resultBytesPerDay'>
    /** Each agent's requests per rate-limit window. */
    agentRequests: number
  }
}

/** A check-in's answer, and whether it was routine (unchanged, nothing to hand over: logged in the summary only). */
export interface CheckInAnswer {
  answer: Schemas['GatewayCheckInResponse']
  routine: boolean
}

type Answer = Schemas['GatewayCheckInResponse']

/** A check-in due for the full comparison. */
interface Comparison {
  ctx: Context
  agentId: number
  body: CheckIn
  localIp: string
  digest: string
  now: number
  /** Its agent's check-in time held in memory, if any (not written yet). */
  heldCheckInMs: number | undefined
}

/** A check-in under comparison: its place in the batch, the stored row and what it becomes. */
interface Compared {
  index: number
  c: Comparison
  before: AgentRow
  after: AgentState
  first: boolean
  previousMs: number
  peripherals?: ReturnType<typeof reconcile>
  delivered?: { commands: Answer['commands']; more: boolean }
}

/** Its answer, or its own error; ALONE: it is compared again by itself. */
type Outcome = { ok: true; answer: Answer } | { ok: false; err: unknown }
const ALONE = Symbol('alone')

/** Check-ins compared and written together at most (batchCheckIns). */
const BATCH_CHECK_INS = 64

export function agentGateway(deps: GatewayDeps) {
  const { store, events, agentState, uow, audit, settings } = deps
  const checkIns = deps.checkIns ?? uow
  const { agents: config, license } = settings
  const limits = gatewayLimits({
    enrollPerMinutePerAddress: config.enrollPerMinutePerAddress,
    enrollPerMinute: config.enrollPerMinute,
    agentRequests: settings.agentRequests,
    windowMs: settings.rateLimitWindowMs,
    resultBytesPerDay: config.resultBytesPerDay,
    minCheckInSeconds: config.minCheckInSeconds,
  })
  /** Errors stored for each agent on the current UTC day. */
  const errorsStored = new Map<number, { day: number; count: number }>()
  /** Unchanged check-ins' times, written once a second (a lost one on a crash is harmless). */
  const heartbeats = new Map<number, number>()
  let flushTimer: NodeJS.Timeout | undefined
  // Settings that change what a check-in means are part of its digest.
  const digestSalt = JSON.stringify([license.accountId, config.checkInSeconds])

  function secretMatches(given: string): boolean {
    // Comparing digests: equal lengths, and the time taken says nothing about the secret.
    return crypto.timingSafeEqual(crypto.createHash('sha256').update(given).digest(), crypto.createHash('sha256').update(config.enrollmentSecret).digest())
  }

  async function seatFree(): Promise<boolean> {
    return (await store.activatedCount()) < license.seats
  }

  /** A new credential: its agent starts afresh (no interval to wait, no check-in time held). */
  function forget(agentId: number) {
    limits.forgetCheckIn(agentId)
    heartbeats.delete(agentId)
  }

  async function enroll(ctx: Context, body: Schemas['GatewayEnrollRequest']): Promise<Schemas['GatewayEnrollResponse']> {
    const now = Date.now()
    if (!secretMatches(body.enrollmentSecret)) {
      await audit.record(ctx, {
        description: `Enrollment of "${body.hostIdentifier}" refused: wrong enrollment secret`,
        details: { machineId: maskMachineId(body.machineId), hostIdentifier: body.hostIdentifier },
        outcome: 'Refused',
        user: null,
        asset: { name: body.hostIdentifier, type: 'Agent' },
        refusal: { status: 401, reason: 'wrong enrollment secret' },
      })
      throw unauthenticated('The enrollment secret is wrong.')
    }
    const credential = newSecret(AGENT_PREFIX)
    const hash = sha256(credential)
    return uow.run(async () => {
      const known = await store.byMachineId(body.machineId)
      let id: number, uuid: string
      if (known) {
        // The shared secret alone never moves an enrolled identity: the agent proves its
        // current credential, or an Administrator approves the new enrollment.
        if (!provesCredential(body.currentCredential, known.credential_hash)) return hold(ctx, known, body, hash, credential, now)
        ;({ id, uuid } = known)
        await store.rotateCredential(id, hash, body.hostIdentifier)
        forget(id)
      } else {
        uuid = crypto.randomUUID().toLowerCase()
        const expiration = license.expirationDate === null ? null : Date.parse(license.expirationDate)
        id = await store.insertAgent({
          uuid,
          machineId: body.machineId,
          credentialHash: hash,
          enrolledMs: now,
          hostIdentifier: body.hostIdentifier,
          licenseStatus: expiration !== null && expiration <= now ? 'Expired' : (await seatFree()) ? 'Activated' : 'Pending',
          expirationMs: expiration,
          licenseAccountName: license.accountName,
          checkInSeconds: config.checkInSeconds,
        })
      }
      const agent = (await store.agent(id))!
      const what = known ? 'enrolled again with its current credential; the previous credential no longer works' : `enrolled (license ${agent.license_status})`
      // Named `HOST (address)` as its later events will be (the address a check-in would
      // report: the one sent, else the caller's), so that a host is one source.
      const named = { ...agent, local_ip_address: agent.local_ip_address ?? body.localIpAddress ?? ctx.sourceAddress ?? null }
      await events.record(now, [hostEvent('enrolled', named, `${body.hostIdentifier} ${what}.`)], id)
      await audit.record(ctx, {
        description: `Agent "${body.hostIdentifier}" ${known ? 're-enrolled (credential rotated)' : 'enrolled'}`,
        details: { uuid, machineId: maskMachineId(body.machineId), hostIdentifier: body.hostIdentifier, reEnrolled: !!known, licenseStatus: agent.license_status },
        user: `agent:${uuid}`,
        asset: agentAsset(agent),
      })
      return { uuid, credential, reEnrolled: !!known, pendingApproval: false, checkInIntervalSeconds: config.checkInSeconds, serverTime: iso(now) }
    })
  }

  function provesCredential(given: string | undefined, storedHash: string | null): boolean {
    if (!given || !storedHash) return false
    const a = Buffer.from(sha256(given))
    const b = Buffer.from(storedHash)
    return a.length === b.length && crypto.timingSafeEqual(a, b)
  }

  /**
   * A re-enrollment without proof: kept aside (the latest one per agent) until an
   * Administrator decides; the agent's current credential keeps working meanwhile.
   */
  async function hold(
    ctx: Context,
    known: { id: number; uuid: string },
    body: Schemas['GatewayEnrollRequest'],
    hash: string,
    credential: string,
    now: number,
  ): Promise<Schemas['GatewayEnrollResponse']> {
    const agent = (await store.agent(known.id))!
    // A new id each time: a decision names the one it reviewed, never a later replacement.
    const reEnrollmentId = crypto.randomUUID()
    await store.holdReEnrollment({ agentId: known.id, id: reEnrollmentId, credentialHash: hash, hostIdentifier: body.hostIdentifier, sourceIp: ctx.sourceAddress, requestedMs: now })
    const proof = body.currentCredential ? "presented a credential that is not the agent's current one" : "did not present the agent's current credential"
    await events.record(
      now,
      [
        hostEvent(
          'reEnrollmentHeld',
          agent,
          `An enrollment as ${agent.host_identifier} (reported host name "${body.hostIdentifier}", from ${ctx.sourceAddress}) ${proof}; held until an Administrator approves it. The agent keeps its current credential meanwhile.`,
        ),
      ],
      known.id,
    )
    await audit.record(ctx, {
      description: `Re-enrollment of agent "${agent.host_identifier}" held for an Administrator's approval: it ${proof}`,
      details: {
        uuid: known.uuid,
        reEnrollmentId,
        machineId: maskMachineId(body.machineId),
        hostIdentifier: body.hostIdentifier,
        reEnrolled: true,
        pendingApproval: true,
        credentialPresented: !!body.currentCredential,
      },
      user: null,
      severity: 4,
      asset: agentAsset(agent),
    })
    return { uuid: known.uuid, credential, reEnrolled: true, pendingApproval: true, checkInIntervalSeconds: config.checkInSeconds, serverTime: iso(now) }
  }

  /**
   * An Administrator's decision on the held re-enrollment `reEnrollmentId` (the one reviewed):
   * approved, its credential replaces the agent's. One that a later enrollment replaced
   * meanwhile is not decided (409): the decision would fall on a request nobody reviewed.
   */
  async function decideReEnrollment(ctx: Context, uuid: string, decision: 'Approve' | 'Reject', reEnrollmentId: string): Promise<Schemas['AgentReEnrollmentDecision']> {
    const now = Date.now()
    return uow.run(async () => {
      const agent = await store.agentByUuid(uuid)
      if (!agent) throw problem('not-found', `No agent with uuid ${uuid}.`)
      const held = await store.heldReEnrollment(agent.id)
      if (!held) throw problem('not-found', `Agent ${agent.host_identifier} has no re-enrollment awaiting approval.`)
      if (held.id !== reEnrollmentId.toLowerCase()) {
        throw problem(
          'reenrollment-replaced',
          `The re-enrollment ${reEnrollmentId} of agent ${agent.host_identifier} is no longer the one held: a later enrollment (reported host name "${held.host_identifier}", from ${held.source_ip ?? 'an unknown address'}, at ${iso(held.requested_ms)}) replaced it. Nothing was decided; review the agent's pendingReEnrollment again.`,
        )
      }
      await store.dropReEnrollment(agent.id)
      const requested = { reEnrollmentId: held.id, requestedTime: iso(held.requested_ms), hostIdentifier: held.host_identifier, sourceIp: held.source_ip }
      if (decision === 'Approve') {
        await store.rotateCredential(agent.id, held.credential_hash, held.host_identifier)
        forget(agent.id)
        await events.record(
          now,
          [hostEvent('enrolled', agent, `${agent.host_identifier} enrolled again, approved by ${ctx.actor ?? 'an Administrator'}; the previous credential no longer works.`)],
          agent.id,
        )
      }
      await audit.record(ctx, {
        description: `${decision === 'Approve' ? 'Approved' : 'Rejected'} the re-enrollment of agent "${agent.host_identifier}"${decision === 'Approve' ? ' (credential replaced)' : ''}`,
        details: { uuid: agent.uuid, decision, ...requested },
        asset: agentAsset(agent),
      })
      return { uuid: agent.uuid, decision, ...requested, decidedTime: iso(now) }
    })
  }

  function heartbeat(agentId: number, now: number) {
    heartbeats.set(agentId, now)
    flushTimer ??= setTimeout(() => {
      flushHeartbeats().catch((err) => deps.log.error({ err }, 'writing check-in times failed; retrying with the next ones'))
    }, HEARTBEAT_FLUSH_MS).unref()
  }

  async function flushHeartbeats(): Promise<void> {
    if (flushTimer) clearTimeout(flushTimer)
    flushTimer = undefined
    if (heartbeats.size === 0) return
    const batch = [...heartbeats]
    heartbeats.clear()
    try {
      await uow.run(() => store.heartbeats(batch))
    } catch (err) {
      // Kept for the next flush, unless a newer time came meanwhile.
      for (const [id, ms] of batch) if (!heartbeats.has(id)) heartbeats.set(id, ms)
      throw err
    }
  }

  /** Hands the oldest pending commands over; call inside a unit of work. */
  async function deliver(agentId: number, now: number) {
    const { commands, more } = await store.deliverPending(agentId, MAX_COMMANDS, now)
    return { commands: commands.map(gatewayCommandView), more }
  }

  function answer(uuid: string, now: number, d: Awaited<ReturnType<typeof deliver>>): Schemas['GatewayCheckInResponse'] {
    return {
      uuid,
      serverTime: iso(now),
      nextCheckInSeconds: d.more ? MORE_COMMANDS_CHECK_IN_SECONDS : config.checkInSeconds,
      moreCommands: d.more,
      commands: d.commands,
    }
  }

  /** `agent`: the one whose credential the call carries. */
  async function checkIn(ctx: Context, agent: GatewayAgent, body: CheckIn): Promise<CheckInAnswer> {
    const now = Date.now()
    const seen = new Set<string>()
    body.peripherals.forEach((p, i) => {
      if (seen.has(p.deviceID)) throw invalidField('body', `peripherals/${i}/deviceID`, 'is listed twice')
      seen.add(p.deviceID)
    })
    // The digest covers the state as sent, key order included: an agent that reorders its
    // keys only costs a full comparison, which then finds nothing new.
    const { agentTime: _time, errors, ...state } = body
    const reportedIp = body.localIpAddress ?? ctx.sourceAddress ?? ''
    const digest = sha256(digestSalt + JSON.stringify(state) + (body.localIpAddress ? '' : reportedIp))
    if (digest === agent.state_digest && agent.connection_status === 'Connected' && !errors?.length) {
      // Nothing changed: no comparison, no audit record (the contract audits changes only).
      ctx.audit.audited = true
      heartbeat(agent.id, now)
      if (!(await store.hasPendingCommands(agent.id))) return { answer: answer(agent.uuid, now, { commands: [], more: false }), routine: true }
      const d = await checkIns.run(async () => {
        const d = await deliver(agent.id, now)
        await agentState.refreshStatus(agent.id)
        return d
      })
      return { answer: answer(agent.uuid, now, d), routine: false }
    }
    const held = heartbeats.get(agent.id)
    heartbeats.delete(agent.id)
    const item: Comparison = { ctx, agentId: agent.id, body, localIp: reportedIp, digest, now, heldCheckInMs: held }
    return { answer: deps.batchCheckIns ? await queued(item) : await alone(item), routine: false }
  }

  /** Check-ins waiting for the next batch (batchCheckIns), in arrival order. */
  const waiting: { item: Comparison; resolve: (a: Answer) => void; reject: (err: unknown) => void }[] = []
  let batchScheduled = false

  function queued(item: Comparison): Promise<Answer> {
    return new Promise((resolve, reject) => {
      waiting.push({ item, resolve, reject })
      if (!batchScheduled) {
        batchScheduled = true
        setImmediate(() => void runBatch())
      }
    })
  }

  /** One check-in in a unit of its own (its group's savepoint under group commit). */
  async function alone(item: Comparison): Promise<Answer> {
    const [outcome] = stored(await checkIns.run(() => compareAll([item])))
    if (!outcome.ok) throw outcome.err
    return outcome.answer
  }

  /**
   * Compares and writes the waiting check-ins together (at most BATCH_CHECK_INS, one per
   * agent: an agent's later one waits for the next batch, as it would for the commit of its
   * first). Each is answered only after the batch's COMMIT. If the batch fails, each of its
   * check-ins runs again alone, so that a bad one fails by itself.
   */
  async function runBatch(): Promise<void> {
    batchScheduled = false
    const taken: typeof waiting = []
    const agents = new Set<number>()
    for (let i = 0; i < waiting.length && taken.length < BATCH_CHECK_INS; ) {
      if (agents.has(waiting[i].item.agentId)) i++
      else {
        agents.add(waiting[i].item.agentId)
        taken.push(...waiting.splice(i, 1))
      }
    }
    if (waiting.length && !batchScheduled) {
      batchScheduled = true
      setImmediate(() => void runBatch())
    }
    let outcomes: Outcome[]
    try {
      outcomes = stored(await uow.run(() => compareAll(taken.map((w) => w.item))))
    } catch {
      for (const w of taken) alone(w.item).then(w.resolve, w.reject)
      return
    }
    for (const [i, w] of taken.entries()) {
      const o = outcomes[i]
      if (o.ok) w.resolve(o.answer)
      else if (o.err === ALONE) alone(w.item).then(w.resolve, w.reject)
      else w.reject(o.err)
    }
  }

  async function licenseAfter(current: AgentRow['license_status'], reportedAccount: string | null | undefined): Promise<AgentRow['license_status']> {
    const expected = license.accountId
    if (expected !== null && reportedAccount && reportedAccount !== expected) return 'Invalid'
    if (current === 'Invalid') return (await seatFree()) ? 'Activated' : 'Pending'
    return current
  }

  /**
   * The full comparison of check-ins with the stored state, one per agent; inside one unit of
   * work. Reads and writes them together (a few statements for all), and answers each one's
   * outcome: its answer, its own refusal, or ALONE (it must run by itself). The same rows,
   * events and audit records as comparing them one after another.
   */
  async function compareAll(items: Comparison[]): Promise<{ outcomes: Outcome[]; counted: [number, { day: number; count: number }][] }> {
    const outcomes: Outcome[] = items.map(() => ({ ok: false, err: ALONE }))
    const rows = new Map((await store.agents(items.map((c) => c.agentId))).map((r) => [r.id, r]))
    const work: Compared[] = []
    for (const [i, c] of items.entries()) {
      const before = rows.get(c.agentId)
      if (!before) outcomes[i] = { ok: false, err: unauthenticated('The agent no longer exists; enroll again.') }
      // Taking a free seat reads the seats in use: one such check-in at a time.
      else if (before.license_status === 'Invalid' && items.length > 1) continue
      else work.push(await prepare(i, c, before))
    }
    if (work.length === 0) return { outcomes, counted: [] }
    const ids = work.map((w) => w.c.agentId)

    await store.updateStates(work.map((w) => ({ id: w.c.agentId, before: w.before, state: w.after })))
    // Peripherals: upsert what was reported; the ones left out are no longer present.
    const known = await store.knownPeripheralsOf(ids)
    for (const w of work) w.peripherals = reconcile(known.get(w.c.agentId) ?? [], w.c.body.peripherals)
    const touched = await store.applyPeripheralsMany(
      work.map((w) => ({ agentId: w.c.agentId, agentUuid: w.before.uuid, changes: w.peripherals!.changes, now: w.c.now, previousMs: w.previousMs })),
      MAX_PERIPHERALS_PER_AGENT,
    )
    const counted: [number, { day: number; count: number }][] = []
    for (const w of work) {
      const errors = reportedErrors(w.c.body)
      if (errors.length) counted.push([w.c.agentId, await storeErrors(w.c.agentId, errors, w.c.now)])
    }

    const pending = new Set(await store.withPendingCommands(ids))
    for (const w of work) w.delivered = pending.has(w.c.agentId) ? await deliver(w.c.agentId, w.c.now) : { commands: [], more: false }
    // Over what the check-ins changed: their peripherals, and every one of an agent whose mode changed.
    const modeChanged = work.filter((w) => w.first || w.before.operational_status !== w.after.operationalStatus).map((w) => w.c.agentId)
    await agentState.refreshCheckIns(ids, touched, modeChanged)

    // Present peripherals are read only for the check-ins where one can raise an event: most bring nobody new.
    const armedNow = (w: Compared) => w.after.operationalStatus === 'Armed' && (w.first || w.before.operational_status !== 'Armed')
    const asking = work.filter((w) => w.peripherals!.appeared.size > 0 || armedNow(w)).map((w) => w.c.agentId)
    const present = asking.length ? await store.presentPeripheralsOf(asking) : new Map<number, PresentPeripheral[]>()
    const batches: EventBatch[] = []
    for (const w of work) {
      const { c, before, after, first, previousMs } = w
      const { appeared, gone, missing } = w.peripherals!
      // Events, in the order things happened to the host, then to its peripherals.
      const ref: AgentRef = { uuid: before.uuid, host_identifier: after.hostIdentifier, local_ip_address: c.localIp }
      const host = after.hostIdentifier
      const raised: EventInput[] = []
      if (!first && before.connection_status === 'Disconnected') {
        raised.push(hostEvent('reconnected', ref, `${host} checks in again; its last check-in was ${iso(previousMs)}.`))
      }
      if (!first && before.operational_status !== after.operationalStatus) {
        raised.push(modeEvent(ref, before.operational_status, after.operationalStatus, await store.modeRequestedBy(c.agentId, after.operationalStatus)))
      }
      const moved = locationChange(before, after)
      if (!first && moved) raised.push(hostEvent('locationChanged', ref, `${host} moved: ${moved}.`))
      // Removed: reported not present, or left out of the list (described as stored).
      for (const p of [...gone.map(storedView), ...missing]) raised.push(removedEvent(ref, p))
      const armed = armedNow(w)
      for (const p of present.get(c.agentId) ?? []) {
        const isNew = appeared.get(p.device_id)
        if (isNew !== undefined) raised.push(...presenceEvents(ref, p, isNew, after.operationalStatus))
        else if (armed && !p.approved) raised.push(unapprovedEvent(ref, p))
      }
      // Most severe last: it becomes the agent's latestEventText (the sort is stable).
      raised.sort((a, b) => b.severity - a.severity)
      batches.push({ createdMs: c.now, events: raised, agentId: c.agentId })
    }
    await events.recordMany(batches)

    for (const w of work) {
      const { c, before, after, first } = w
      const { changes, appeared, gone, missing } = w.peripherals!
      const added = changes.reported.filter((r) => r.id === null).length
      const changed = auditableChanges(before, after, first, { connected: appeared.size, removed: gone.length + missing.length, added })
      if (Object.keys(changed).length > 0) {
        await audit.record(c.ctx, {
          description: `Check-in of "${after.hostIdentifier}" changed ${Object.keys(changed).join(', ')}`,
          details: changed,
          user: `agent:${before.uuid}`,
          asset: agentAsset({ uuid: before.uuid, host_identifier: after.hostIdentifier, local_ip_address: c.localIp, running_mode: after.runningMode, os_version: after.osVersion }),
        })
      } else {
        // Changes of address, users or adapters only: events where the contract has them, no audit record.
        c.ctx.audit.audited = true
      }
      outcomes[w.index] = { ok: true, answer: answer(before.uuid, c.now, w.delivered!) }
    }
    return { outcomes, counted }
  }

  /** Counts the errors stored, once they are stored for good (a unit that rolls back stored none). */
  function stored<T>(r: { outcomes: T; counted: [number, { day: number; count: number }][] }): T {
    for (const [id, used] of r.counted) errorsStored.set(id, used)
    return r.outcomes
  }

  /** A check-in's new state for its agent, from its report and the stored row. */
  async function prepare(index: number, c: Comparison, before: AgentRow): Promise<Compared> {
    const { body, localIp, digest, now } = c
    const first = before.last_updated_ms === null
    const previousMs = Math.max(before.last_updated_ms ?? 0, c.heldCheckInMs ?? 0)
    const nics = body.nics ?? []
    const addresses = [...new Set([localIp, ...nics.flatMap((n) => n.ipAddresses)].filter(Boolean))]
    const sw = body.connectedSwitch ?? {}
    const after: AgentState = {
      hostIdentifier: body.hostIdentifier,
      localIpAddress: localIp,
      osVersion: body.osVersion ?? null,
      manufacturer: body.manufacturer ?? null,
      pcModel: body.pcModel ?? null,
      nicsJson: JSON.stringify(nics),
      nicsText: nicsText(nics),
      ipAddresses: addresses.length ? addresses.join(' ') : null,
      operationalStatus: body.operationalStatus,
      isSystemLocked: body.isSystemLocked ? 1 : 0,
      serviceVersion: body.serviceVersion ?? null,
      kbDriverVersion: body.kbDriverVersion ?? null,
      licenseStatus: await licenseAfter(before.license_status, body.licenseAccountId),
      licenseAccountId: body.licenseAccountId ?? null,
      modelTooltip: modelTooltip(body.manufacturer, body.pcModel, body.osVersion, nics.length),
      runningMode: body.runningMode ?? null,
      switchIp: sw.ip ?? null,
      switchName: sw.name ?? null,
      portId: sw.portId ?? null,
      portName: sw.portName ?? null,
      ethernetsCount: nics.filter((n) => n.isEthernet).length,
      hashtags: body.hashtags?.length ? body.hashtags.join(' ') : null,
      loggedOnUsers: JSON.stringify(body.loggedOnUsers ?? []),
      checkInSeconds: config.checkInSeconds,
      lastUpdatedMs: now,
      stateDigest: digest,
    }
    return { index, c, before, after, first, previousMs }
  }

  /** Stores an agent's reported errors, up to its allowance of the day (a flood cannot grow the table without end). */
  async function storeErrors(agentId: number, errors: ReturnType<typeof reportedErrors>, now: number) {
    const day = Math.floor(now / DAY_MS)
    const used = errorsStored.get(agentId)
    const today = used && used.day === day ? used.count : 0
    const kept = errors.slice(0, Math.max(0, MAX_ERRORS_PER_AGENT_PER_DAY - today))
    await store.addErrors(agentId, kept)
    return { day, count: today + kept.length }
  }

  function reportedErrors(body: CheckIn) {
    return (body.errors ?? []).map((e) => ({ time: Date.parse(e.time), code: e.code ?? null, message: e.message }))
  }

  function locationChange(before: AgentRow, after: AgentState): string | null {
    const parts: string[] = []
    const diff = (what: string, a: string | null, b: string | null) => {
      if (a !== b) parts.push(`${what} ${a ?? 'none'} -> ${b ?? 'none'}`)
    }
    diff('address', before.local_ip_address, after.localIpAddress)
    diff('switch', before.switch_ip, after.switchIp)
    diff('switch name', before.switch_name, after.switchName)
    diff('port', before.port_id, after.portId)
    return parts.length ? parts.join(', ') : null
  }

  function auditableChanges(before: AgentRow, after: AgentState, first: boolean, peripherals: { connected: number; removed: number; added: number }) {
    const changes: Record<string, Change | typeof peripherals> = {}
    const diff = (name: string, a: unknown, b: unknown) => {
      if (a !== b) changes[name] = { from: a, to: b }
    }
    if (!first) diff('hostIdentifier', before.host_identifier, after.hostIdentifier)
    if (!first || after.operationalStatus !== 'Free') diff('operationalStatus', before.operational_status, after.operationalStatus)
    diff('serviceVersion', before.service_version, after.serviceVersion)
    diff('kbDriverVersion', before.kb_driver_version, after.kbDriverVersion)
    diff('licenseStatus', before.license_status, after.licenseStatus)
    diff('licenseAccountId', before.license_account_id, after.licenseAccountId)
    if (peripherals.connected || peripherals.removed || peripherals.added) changes.peripherals = peripherals
    return changes
  }

  /** `agentId`: the agent whose credential the call carries. */
  async function reportResults(ctx: Context, agentId: number, body: Schemas['GatewayCommandResultsRequest']): Promise<Schemas['ItemResults']> {
    const now = Date.now()
    return checkIns.run(async () => {
      const agent = await store.agent(agentId)
      if (!agent) throw unauthenticated('The agent no longer exists; enroll again.')
      const ref: AgentRef = agent
      const results: ItemResult[] = []
      const raised: EventInput[] = []
      const refused: FieldError[] = []
      let mode = agent.operational_status
      let changed = false
      let armed = false
      const fail = (i: number, id: string, code: 'not-found' | 'conflict', reason: string) => {
        results.push({ id, status: 'failed', code, reason })
        refused.push({ location: 'body', name: `results/${i}/commandId`, reason: `${code}: ${reason}` })
      }
      for (const [i, r] of body.results.entries()) {
        const id = String(r.commandId)
        const c = await store.command(r.commandId)
        // Results are taken only for commands given to this agent and still awaiting one.
        if (!c || c.agent_id !== agentId) {
          fail(i, id, 'not-found', `Command ${id} is unknown to this agent.`)
          continue
        }
        const timedOut = c.status === 'Failed' && c.result_message === NO_RESULT
        if (c.status !== 'Delivered' && !timedOut) {
          const why = c.status === 'Pending' ? 'was never delivered' : c.status === 'Cancelled' ? 'was cancelled' : `was already reported as ${c.status}`
          fail(i, id, 'conflict', `Command ${id} ${why}.`)
          continue
        }
        const output = c.type === 'FetchDebugLogs' && typeof r.output === 'string' ? r.output : null
        await store.completeCommand({ id: c.id, status: r.status, now, message: r.message ?? null, hasOutput: output !== null ? 1 : 0 })
        if (output !== null) await store.addDebugLog(agentId, c.id, now, output, DEBUG_LOGS_KEPT)
        if (r.status === 'Failed') {
          raised.push(hostEvent('commandFailed', ref, `${c.type} command ${c.id} failed on ${agent.host_identifier}: ${r.message || 'no message'}.`))
        } else if (c.type === 'SetMode') {
          const wanted = gatewayCommandView(c).parameters.mode
          if (wanted && wanted !== mode) {
            raised.push(modeEvent(ref, mode, wanted, c.created_by))
            armed ||= wanted === 'Armed'
            mode = wanted
          }
          await store.setMode(agentId, wanted ?? mode, now)
        } else if (c.type === 'UpdatePolicy') {
          await store.setConfigured(agentId, now)
        }
        changed = true
        results.push({ id, status: 'done', code: null, reason: null })
      }
      if (!changed) {
        // Nothing taken: a refusal (its repeats are counted, not written, in the audit trail).
        const unknown = refused.every((e) => e.reason.startsWith('not-found'))
        throw problem(unknown ? 'not-found' : 'conflict', unknown ? 'No result is for a command of this agent.' : 'No result is for a command of this agent awaiting its result.', {
          errors: refused.slice(0, MAX_LISTED_REFUSALS),
        })
      }
      await agentState.refreshAgent(agentId)
      if (armed && mode === 'Armed') {
        for (const p of await store.presentPeripherals(agentId)) if (!p.approved) raised.push(unapprovedEvent(ref, p))
      }
      await events.record(now, raised, agentId)
      const failed = results.filter((r) => r.status === 'failed').length
      await audit.record(ctx, {
        description: `Agent "${agent.host_identifier}" reported ${body.results.length} command result(s)${failed ? `, ${failed} refused` : ''}`,
        details: { results: body.results.map((r, i) => ({ commandId: r.commandId, status: r.status, message: r.message ?? null, answer: results[i].code ?? 'done' })) },
        user: `agent:${agent.uuid}`,
        asset: agentAsset(agent),
      })
      return { succeeded: results.length - failed, failed, results }
    })
  }

  return {
    /** The gateway's limits, checked before anything else (lib/gateway/limits.ts). */
    admit: limits.admit,
    /** Counts an enrollment answered with an error (a wrong secret, an invalid body, ...). */
    enrollmentFailed: limits.enrollmentFailed,
    enroll,
    decideReEnrollment,
    checkIn,
    reportResults,
    flushHeartbeats,
    /** Forgets what no longer matters: expired enrollment windows and old check-in times. */
    prune(now: number) {
      limits.prune(now)
      const day = Math.floor(now / DAY_MS)
      for (const [id, used] of errorsStored) if (used.day !== day) errorsStored.delete(id)
    },
  }
}
export type AgentGateway = ReturnType<typeof agentGateway>
