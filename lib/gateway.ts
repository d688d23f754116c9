// The agent gateway: enrollment, check-ins and command results. A check-in carries the
// agent's whole state; the server records what changed since the last one as events.
import crypto from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { components } from '../generated/openapi.js'
import type { EventInput } from '../db/events.js'
import { internPeripheralTexts, type AgentRow, type AgentState, type CommandRow, type GatewayAgent, type PeripheralValues, type PresentPeripheral } from '../db/gateway.js'
import { audit } from './audit.js'
import { contextOf } from './platform/context.js'
import { AGENT_PREFIX, unauthenticated } from './auth.js'
import { invalidField, problem, type FieldError } from './errors.js'
import { eventOf } from './event-codes.js'
import { newSecret, sha256 } from './passwords.js'
import { fixedWindowLimiter, limitKey } from './rate-limit.js'
import { iso } from './time.js'
import type { Operation } from './contract.js'
import { deviceIcon, displaySerial, productName, vendorName } from './usb.js'
import { agentAsset, maskMachineId } from './agents/views.js'

type Schemas = components['schemas']
type CheckIn = Schemas['GatewayCheckInRequest']
type PeripheralReport = Schemas['GatewayPeripheralReport']
type ItemResult = Schemas['ItemResult']

const ENROLL_FAILURES_PER_MINUTE = 20
const DAY_MS = 86_400_000
const MAX_COMMANDS = 50
const MORE_COMMANDS_CHECK_IN_SECONDS = 5
const MAX_PERIPHERALS_PER_AGENT = 2048
const DEBUG_LOGS_KEPT = 5
const HEARTBEAT_FLUSH_MS = 1000
export const NO_RESULT = 'No result reported'
const MAX_LISTED_REFUSALS = 20
/** Reported errors stored per agent per UTC day; more are answered but not stored. */
export const MAX_ERRORS_PER_AGENT_PER_DAY = 1000

/** The events the gateway raises (lib/event-codes.ts, the table of `getEvents` in the contract). */
export const agentEvents = {
  peripheralNew: eventOf('peripheralNew'),
  peripheralReconnected: eventOf('peripheralReconnected'),
  peripheralDisconnected: eventOf('peripheralDisconnected'),
  unapprovedOnArmed: eventOf('unapprovedOnArmed'),
  whitelistViolation: eventOf('whitelistViolation'),
  attackTool: eventOf('attackTool'),
  vulnerable: eventOf('vulnerable'),
  locationChanged: eventOf('locationChanged'),
  modeChanged: eventOf('modeChanged'),
  disconnected: eventOf('disconnected'),
  reconnected: eventOf('reconnected'),
  enrolled: eventOf('enrolled'),
  commandFailed: eventOf('commandFailed'),
  reEnrollmentHeld: eventOf('reEnrollmentHeld'),
}
type EventKind = keyof typeof agentEvents

type AgentRef = Pick<GatewayAgent, 'uuid' | 'host_identifier' | 'local_ip_address'>

/** An event about an agent itself. */
export function hostEvent(kind: EventKind, agent: AgentRef, details: string): EventInput {
  return {
    ...agentEvents[kind],
    entityId: (agent.local_ip_address ? `${agent.host_identifier} (${agent.local_ip_address})` : agent.host_identifier).slice(0, 300),
    details,
    assetKey: agent.uuid,
    assetName: agent.host_identifier,
  }
}

function peripheralEvent(
  kind: EventKind,
  agent: AgentRef,
  p: Omit<PresentPeripheral, 'approved' | 'is_attack_tool' | 'is_vulnerable' | 'catalogue_name'>,
  details: string,
  hashtags: string | null = null,
): EventInput {
  return {
    ...hostEvent(kind, agent, details),
    hashtags,
    peripheralIcon: p.dev_icon,
    peripheralAssetId: p.device_id,
    peripheralVid: p.vid,
    peripheralPid: p.pid,
  }
}

const deviceLabel = (p: Pick<PresentPeripheral, 'gui_vid' | 'gui_pid' | 'vid' | 'pid' | 'gui_serial'>, host: string) =>
  `${[p.gui_vid, p.gui_pid].filter(Boolean).join(' ') || 'Unknown device'} (VID ${p.vid}, PID ${p.pid}${p.gui_serial ? `, serial ${p.gui_serial}` : ''}) on ${host}`

/** What the server stores and derives from one reported peripheral (texts aside). */
export function derivePeripheral(p: PeripheralReport): Omit<PeripheralValues, 'vendorTextId' | 'productTextId'> {
  const vid = p.vid.toUpperCase()
  const pid = p.pid.toUpperCase()
  return {
    deviceId: p.deviceID,
    vid,
    pid,
    serialNumber: p.serialNumber ?? null,
    description: p.description ?? null,
    status: p.status ?? null,
    manufacturer: p.manufacturer ?? null,
    caption: p.caption ?? null,
    guiVid: vendorName(vid) ?? (p.manufacturer || null),
    guiPid: productName(vid, pid) ?? (p.caption || null),
    guiSerial: displaySerial(p.serialNumber),
    devIcon: deviceIcon(p.classCode, p.subclassCode, p.protocolCode),
    classCode: p.classCode?.toUpperCase() ?? null,
    subclassCode: p.subclassCode?.toUpperCase() ?? null,
    protocolCode: p.protocolCode?.toUpperCase() ?? null,
    hierarchy: p.hierarchy ?? null,
    parentDeviceId: p.parentDeviceID ?? null,
    isDisabled: p.isDisabled ? 1 : 0,
    present: p.present ? 1 : 0,
  }
}

/** `name||mac||ip,ip||status` per adapter, joined by `**` (the list's `nicsText`). */
export function nicsText(nics: Schemas['AgentNic'][]): string | null {
  if (nics.length === 0) return null
  return nics
    .map((n) => [n.name, n.macAddress ?? '', n.ipAddresses.join(','), n.status].join('||'))
    .join('**')
    .slice(0, 8192)
}

export function modelTooltip(manufacturer: string | null | undefined, model: string | null | undefined, os: string | null | undefined, adapters: number): string {
  const machine = [manufacturer, model].filter(Boolean).join(' ')
  return [machine, os, `${adapters} network adapter${adapters === 1 ? '' : 's'}`].filter(Boolean).join(' - ').slice(0, 512)
}

/** Failed enrollments per source address, per fixed minute. */
class FailureWindow {
  private readonly entries = new Map<string, { count: number; resetMs: number }>()
  constructor(
    private readonly max: number,
    private readonly windowMs: number,
  ) {}

  /** Seconds until the address may try again, or 0. */
  blockedFor(key: string, now: number): number {
    const e = this.entries.get(key)
    return e && e.resetMs > now && e.count >= this.max ? Math.ceil((e.resetMs - now) / 1000) : 0
  }

  fail(key: string, now: number): void {
    const e = this.entries.get(key)
    if (e && e.resetMs > now) e.count++
    else this.entries.set(key, { count: 1, resetMs: now + this.windowMs })
  }

  prune(now: number): void {
    for (const [k, e] of this.entries) if (e.resetMs <= now) this.entries.delete(k)
  }
}

interface Change {
  from: unknown
  to: unknown
}

export function agentGateway(app: FastifyInstance) {
  const { config, db, repos } = app
  const texts = internPeripheralTexts(db)
  const failedEnrollments = new FailureWindow(ENROLL_FAILURES_PER_MINUTE, 60_000)
  // Accepted enrollments are limited too (per address, and overall), so that no one holding
  // the secret can create agents, events and audit records without end.
  const enrollmentsPerAddress = fixedWindowLimiter(config.agents.enrollPerMinutePerAddress, 60_000)
  const enrollments = fixedWindowLimiter(config.agents.enrollPerMinute, 60_000)
  /** Each agent's requests per rate-limit window, whatever its address. */
  const agentBudget = fixedWindowLimiter(config.credentialRateLimits.agent, config.rateLimitWindowMs)
  /** Bytes of command results each agent sent on the current UTC day. */
  const resultBytes = new Map<number, { day: number; bytes: number }>()
  /** Errors stored for each agent on the current UTC day. */
  const errorsStored = new Map<number, { day: number; count: number }>()
  /** When each agent's last accepted check-in arrived (the minimum interval). */
  const lastCheckIn = new Map<number, number>()
  /** Unchanged check-ins' times, written once a second (a lost one on a crash is harmless). */
  const heartbeats = new Map<number, number>()
  let flushTimer: NodeJS.Timeout | undefined
  // Settings that change what a check-in means are part of its digest.
  const digestSalt = JSON.stringify([config.license.accountId, config.agents.checkInSeconds])

  if (config.agents.enrollmentSecretGenerated) {
    // Printed once, on the start that generated it; it is kept in the data dir.
    app.log.warn(`Generated the agent enrollment secret: ${config.agents.enrollmentSecret}  (kept in ${config.dataDir}/agent-enrollment-secret; PRIME_AGENT_ENROLLMENT_SECRET overrides it)`)
  }

  function secretMatches(given: string): boolean {
    // Comparing digests: equal lengths, and the time taken says nothing about the secret.
    return crypto.timingSafeEqual(crypto.createHash('sha256').update(given).digest(), crypto.createHash('sha256').update(config.agents.enrollmentSecret).digest())
  }

  function seatFree(): boolean {
    return repos.gateway.activatedCount() < config.license.seats
  }

  function enroll(req: FastifyRequest, body: Schemas['GatewayEnrollRequest']): Schemas['GatewayEnrollResponse'] {
    const now = Date.now()
    if (!secretMatches(body.enrollmentSecret)) {
      audit(req, {
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
    return db.transaction(() => {
      const known = repos.gateway.byMachineId(body.machineId)
      let id: number, uuid: string
      if (known) {
        // The shared secret alone never moves an enrolled identity: the agent proves its
        // current credential, or an Administrator approves the new enrollment.
        if (!provesCredential(body.currentCredential, known.credential_hash)) return hold(req, known, body, credential, hash, now)
        ;({ id, uuid } = known)
        repos.gateway.rotateCredential(id, hash, body.hostIdentifier)
        lastCheckIn.delete(id)
        heartbeats.delete(id)
      } else {
        uuid = crypto.randomUUID().toLowerCase()
        const expiration = config.license.expirationDate === null ? null : Date.parse(config.license.expirationDate)
        id = repos.gateway.insertAgent({
          uuid,
          machineId: body.machineId,
          credentialHash: hash,
          enrolledMs: now,
          hostIdentifier: body.hostIdentifier,
          licenseStatus: expiration !== null && expiration <= now ? 'Expired' : seatFree() ? 'Activated' : 'Pending',
          expirationMs: expiration,
          licenseAccountName: config.license.accountName,
          checkInSeconds: config.agents.checkInSeconds,
        })
      }
      const agent = repos.gateway.agent(id)!
      const what = known ? 'enrolled again with its current credential; the previous credential no longer works' : `enrolled (license ${agent.license_status})`
      // Named `HOST (address)` as its later events will be (the address a check-in would
      // report: the one sent, else the request's), so that a host is one source.
      const named = { ...agent, local_ip_address: agent.local_ip_address ?? body.localIpAddress ?? req.ip ?? null }
      repos.events.record(now, [hostEvent('enrolled', named, `${body.hostIdentifier} ${what}.`)], id)
      audit(req, {
        description: `Agent "${body.hostIdentifier}" ${known ? 're-enrolled (credential rotated)' : 'enrolled'}`,
        details: { uuid, machineId: maskMachineId(body.machineId), hostIdentifier: body.hostIdentifier, reEnrolled: !!known, licenseStatus: agent.license_status },
        user: `agent:${uuid}`,
        asset: agentAsset(agent),
      })
      return { uuid, credential, reEnrolled: !!known, pendingApproval: false, checkInIntervalSeconds: config.agents.checkInSeconds, serverTime: iso(now) }
    })()
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
  function hold(req: FastifyRequest, known: { id: number; uuid: string }, body: Schemas['GatewayEnrollRequest'], credential: string, hash: string, now: number): Schemas['GatewayEnrollResponse'] {
    const agent = repos.gateway.agent(known.id)!
    repos.gateway.holdReEnrollment({ agentId: known.id, credentialHash: hash, hostIdentifier: body.hostIdentifier, sourceIp: req.ip ?? null, requestedMs: now })
    const proof = body.currentCredential ? "presented a credential that is not the agent's current one" : "did not present the agent's current credential"
    repos.events.record(
      now,
      [
        hostEvent(
          'reEnrollmentHeld',
          agent,
          `An enrollment as ${agent.host_identifier} (reported host name "${body.hostIdentifier}", from ${req.ip}) ${proof}; held until an Administrator approves it. The agent keeps its current credential meanwhile.`,
        ),
      ],
      known.id,
    )
    audit(req, {
      description: `Re-enrollment of agent "${agent.host_identifier}" held for an Administrator's approval: it ${proof}`,
      details: {
        uuid: known.uuid,
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
    return { uuid: known.uuid, credential, reEnrolled: true, pendingApproval: true, checkInIntervalSeconds: config.agents.checkInSeconds, serverTime: iso(now) }
  }

  /** An Administrator's decision on a held re-enrollment: approved, its credential replaces the agent's. */
  function decideReEnrollment(req: FastifyRequest, uuid: string, decision: 'Approve' | 'Reject'): Schemas['AgentReEnrollmentDecision'] {
    const now = Date.now()
    return db.transaction(() => {
      const agent = repos.gateway.agentByUuid(uuid)
      if (!agent) throw problem('not-found', `No agent with uuid ${uuid}.`)
      const held = repos.gateway.heldReEnrollment(agent.id)
      if (!held) throw problem('not-found', `Agent ${agent.host_identifier} has no re-enrollment awaiting approval.`)
      repos.gateway.dropReEnrollment(agent.id)
      const requested = { requestedTime: iso(held.requested_ms), hostIdentifier: held.host_identifier, sourceIp: held.source_ip }
      if (decision === 'Approve') {
        repos.gateway.rotateCredential(agent.id, held.credential_hash, held.host_identifier)
        lastCheckIn.delete(agent.id)
        heartbeats.delete(agent.id)
        repos.events.record(
          now,
          [hostEvent('enrolled', agent, `${agent.host_identifier} enrolled again, approved by ${req.principal?.name ?? 'an Administrator'}; the previous credential no longer works.`)],
          agent.id,
        )
      }
      audit(req, {
        description: `${decision === 'Approve' ? 'Approved' : 'Rejected'} the re-enrollment of agent "${agent.host_identifier}"${decision === 'Approve' ? ' (credential replaced)' : ''}`,
        details: { uuid: agent.uuid, decision, ...requested },
        asset: agentAsset(agent),
      })
      return { uuid: agent.uuid, decision, ...requested, decidedTime: iso(now) }
    })()
  }

  function heartbeat(agentId: number, now: number) {
    heartbeats.set(agentId, now)
    flushTimer ??= setTimeout(() => {
      try {
        flushHeartbeats()
      } catch (err) {
        app.log.error({ err }, 'writing check-in times failed; retrying with the next ones')
      }
    }, HEARTBEAT_FLUSH_MS).unref()
  }

  function flushHeartbeats() {
    if (flushTimer) clearTimeout(flushTimer)
    flushTimer = undefined
    if (heartbeats.size === 0) return
    const batch = [...heartbeats]
    heartbeats.clear()
    try {
      db.transaction(() => repos.gateway.heartbeats(batch))()
    } catch (err) {
      // Kept for the next flush, unless a newer time came meanwhile.
      for (const [id, ms] of batch) if (!heartbeats.has(id)) heartbeats.set(id, ms)
      throw err
    }
  }

  function commandView(c: CommandRow): Schemas['GatewayCommand'] {
    let stored: Record<string, unknown> = {}
    try {
      stored = JSON.parse(c.parameters) ?? {}
    } catch {
      // parameters are written by the server; unreadable ones are sent as none
    }
    const parameters: Schemas['AgentCommandParameters'] = {}
    if (stored.mode === 'Armed' || stored.mode === 'Free') parameters.mode = stored.mode
    if (Array.isArray(stored.approvedPeripherals)) parameters.approvedPeripherals = stored.approvedPeripherals as Schemas['PeripheralModel'][]
    return { commandId: c.id, type: c.type, parameters, creationTime: iso(c.created_ms), creationTimeEpoch: c.created_ms }
  }

  /** Hands the oldest pending commands over; call inside a transaction. */
  function deliver(agentId: number, now: number) {
    const rows = repos.gateway.pendingCommands(agentId, MAX_COMMANDS + 1)
    const batch = rows.slice(0, MAX_COMMANDS)
    for (const c of batch) repos.gateway.markDelivered(c.id, now)
    return { commands: batch.map(commandView), more: rows.length > MAX_COMMANDS }
  }

  function answer(uuid: string, now: number, d: ReturnType<typeof deliver>): Schemas['GatewayCheckInResponse'] {
    return {
      uuid,
      serverTime: iso(now),
      nextCheckInSeconds: d.more ? MORE_COMMANDS_CHECK_IN_SECONDS : config.agents.checkInSeconds,
      moreCommands: d.more,
      commands: d.commands,
    }
  }

  function checkIn(req: FastifyRequest, body: CheckIn): Schemas['GatewayCheckInResponse'] {
    const agent = req.agent!
    const now = Date.now()
    const seen = new Set<string>()
    body.peripherals.forEach((p, i) => {
      if (seen.has(p.deviceID)) throw invalidField('body', `peripherals/${i}/deviceID`, 'is listed twice')
      seen.add(p.deviceID)
    })
    // The digest covers the state as sent, key order included: an agent that reorders its
    // keys only costs a full comparison, which then finds nothing new.
    const { agentTime: _time, errors, ...state } = body
    const reportedIp = body.localIpAddress ?? req.ip
    const digest = sha256(digestSalt + JSON.stringify(state) + (body.localIpAddress ? '' : reportedIp))
    if (digest === agent.state_digest && agent.connection_status === 'Connected' && !errors?.length) {
      // Nothing changed: no comparison, no audit record (the contract audits changes only).
      contextOf(req).audit.audited = true
      heartbeat(agent.id, now)
      // Routine traffic: logged in the per-minute summary, not line by line (lib/log.ts).
      req.routine = !repos.gateway.hasPendingCommands(agent.id)
      if (req.routine) return answer(agent.uuid, now, { commands: [], more: false })
      return answer(
        agent.uuid,
        now,
        db.transaction(() => {
          const d = deliver(agent.id, now)
          repos.agentState.refreshStatus(agent.id)
          return d
        })(),
      )
    }
    const held = heartbeats.get(agent.id)
    heartbeats.delete(agent.id)
    return db.transaction(() => compare(req, agent.id, body, reportedIp, digest, now, held))()
  }

  function licenseAfter(current: AgentRow['license_status'], reportedAccount: string | null | undefined): AgentRow['license_status'] {
    const expected = config.license.accountId
    if (expected !== null && reportedAccount && reportedAccount !== expected) return 'Invalid'
    if (current === 'Invalid') return seatFree() ? 'Activated' : 'Pending'
    return current
  }

  /** The full comparison of a check-in with the stored state; inside one transaction. */
  function compare(req: FastifyRequest, agentId: number, body: CheckIn, localIp: string, digest: string, now: number, heldCheckInMs: number | undefined) {
    const before = repos.gateway.agent(agentId)
    if (!before) throw unauthenticated('The agent no longer exists; enroll again.')
    const first = before.last_updated_ms === null
    const previousMs = Math.max(before.last_updated_ms ?? 0, heldCheckInMs ?? 0)
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
      licenseStatus: licenseAfter(before.license_status, body.licenseAccountId),
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
      checkInSeconds: config.agents.checkInSeconds,
      lastUpdatedMs: now,
      stateDigest: digest,
    }
    repos.gateway.updateState(agentId, after)

    // Peripherals: upsert what was reported; the ones left out are no longer present.
    const known = new Map(repos.gateway.knownPeripherals(agentId).map((p) => [p.device_id, p]))
    const appeared = new Map<string, boolean>() // device id -> new to this agent
    const gone: ReturnType<typeof derivePeripheral>[] = []
    let added = 0
    for (const report of body.peripherals) {
      const d = derivePeripheral(report)
      const values: PeripheralValues = { ...d, ...texts(d) }
      const old = known.get(d.deviceId)
      if (old) {
        known.delete(d.deviceId)
        repos.gateway.updatePeripheral(old.id, values, now, previousMs)
        if (d.present && !old.present) appeared.set(d.deviceId, false)
        if (!d.present && old.present) gone.push(d)
      } else {
        repos.gateway.insertPeripheral(agentId, before.uuid, values, now)
        added++
        if (d.present) appeared.set(d.deviceId, true)
      }
    }
    const missing = [...known.values()].filter((p) => p.present)
    for (const p of missing) repos.gateway.markAbsent(p.id, previousMs)
    repos.gateway.capPeripherals(agentId, MAX_PERIPHERALS_PER_AGENT)
    storeErrors(agentId, reportedErrors(body), now)

    const delivered = deliver(agentId, now)
    repos.agentState.refreshAgent(agentId)

    // Events, in the order things happened to the host, then to its peripherals.
    const ref: AgentRef = { uuid: before.uuid, host_identifier: after.hostIdentifier, local_ip_address: localIp }
    const host = after.hostIdentifier
    const events: EventInput[] = []
    if (!first && before.connection_status === 'Disconnected') {
      events.push(hostEvent('reconnected', ref, `${host} checks in again; its last check-in was ${iso(previousMs)}.`))
    }
    if (!first && before.operational_status !== after.operationalStatus) {
      events.push(modeEvent(ref, before.operational_status, after.operationalStatus, repos.gateway.modeRequestedBy(agentId, after.operationalStatus)))
    }
    const moved = locationChange(before, after)
    if (!first && moved) events.push(hostEvent('locationChanged', ref, `${host} moved: ${moved}.`))

    // Removed: reported not present, or left out of the list (described as stored).
    for (const p of [...gone.map(storedView), ...missing]) {
      events.push(peripheralEvent('peripheralDisconnected', ref, p, `${deviceLabel(p, host)} was removed.`))
    }
    const present = repos.gateway.presentPeripherals(agentId)
    const armedNow = after.operationalStatus === 'Armed' && (first || before.operational_status !== 'Armed')
    for (const p of present) {
      const isNew = appeared.get(p.device_id)
      if (isNew !== undefined) events.push(...presenceEvents(ref, p, isNew, after.operationalStatus))
      else if (armedNow && !p.approved) events.push(unapprovedEvent(ref, p))
    }
    // Most severe last: it becomes the agent's latestEventText (the sort is stable).
    events.sort((a, b) => b.severity - a.severity)
    repos.events.record(now, events, agentId)

    const changes = auditableChanges(before, after, first, { connected: appeared.size, removed: gone.length + missing.length, added })
    if (Object.keys(changes).length > 0) {
      audit(req, {
        description: `Check-in of "${host}" changed ${Object.keys(changes).join(', ')}`,
        details: changes,
        user: `agent:${before.uuid}`,
        asset: agentAsset({ uuid: before.uuid, host_identifier: host, local_ip_address: localIp, running_mode: after.runningMode, os_version: after.osVersion }),
      })
    } else {
      // Changes of address, users or adapters only: events where the contract has them, no audit record.
      contextOf(req).audit.audited = true
    }
    return answer(before.uuid, now, delivered)
  }

  /** Stores an agent's reported errors, up to its allowance of the day (a flood cannot grow the table without end). */
  function storeErrors(agentId: number, errors: ReturnType<typeof reportedErrors>, now: number) {
    if (errors.length === 0) return
    const day = Math.floor(now / DAY_MS)
    const used = errorsStored.get(agentId)
    const today = used && used.day === day ? used.count : 0
    const kept = errors.slice(0, Math.max(0, MAX_ERRORS_PER_AGENT_PER_DAY - today))
    for (const e of kept) repos.gateway.addError(agentId, e.time, e.code, e.message)
    errorsStored.set(agentId, { day, count: today + kept.length })
  }

  function reportedErrors(body: CheckIn) {
    return (body.errors ?? []).map((e) => ({ time: Date.parse(e.time), code: e.code ?? null, message: e.message }))
  }

  function storedView(d: ReturnType<typeof derivePeripheral>) {
    return { device_id: d.deviceId, vid: d.vid, pid: d.pid, gui_vid: d.guiVid, gui_pid: d.guiPid, serial_number: d.serialNumber, gui_serial: d.guiSerial, dev_icon: d.devIcon }
  }

  function modeEvent(ref: AgentRef, from: string, to: string, requestedBy: string | undefined): EventInput {
    return hostEvent('modeChanged', ref, `${ref.host_identifier} is now ${to} (was ${from}); ${requestedBy ? `requested by ${requestedBy}` : 'changed on the host'}.`)
  }

  function unapprovedEvent(ref: AgentRef, p: PresentPeripheral): EventInput {
    return peripheralEvent('unapprovedOnArmed', ref, p, `${deviceLabel(p, ref.host_identifier)} is not approved; agent is Armed, device blocked.`, '#unapproved #armed')
  }

  function presenceEvents(ref: AgentRef, p: PresentPeripheral, isNew: boolean, mode: string): EventInput[] {
    const label = deviceLabel(p, ref.host_identifier)
    const out = [peripheralEvent(isNew ? 'peripheralNew' : 'peripheralReconnected', ref, p, `${label}.`)]
    const stance = `agent is ${mode}${mode === 'Armed' && !p.approved ? ', device blocked' : ''}`
    if (p.is_attack_tool) out.push(peripheralEvent('attackTool', ref, p, `${label}: ${p.catalogue_name}; ${stance}.`, `#attack-tool #${mode.toLowerCase()}`))
    if (p.is_vulnerable) out.push(peripheralEvent('vulnerable', ref, p, `${label}: ${p.catalogue_name}; ${stance}.`, '#vulnerable'))
    // Plugged in while Armed and not approved: the agent blocks it (a whitelist violation).
    if (mode === 'Armed' && !p.approved) out.push(peripheralEvent('whitelistViolation', ref, p, `${label} is not approved; agent is Armed, device blocked.`, '#whitelist-violation #armed'))
    return out
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

  function reportResults(req: FastifyRequest, body: Schemas['GatewayCommandResultsRequest']): Schemas['ItemResults'] {
    const agentId = req.agent!.id
    const now = Date.now()
    return db.transaction(() => {
      const agent = repos.gateway.agent(agentId)
      if (!agent) throw unauthenticated('The agent no longer exists; enroll again.')
      const ref: AgentRef = agent
      const results: ItemResult[] = []
      const events: EventInput[] = []
      const refused: FieldError[] = []
      let mode = agent.operational_status
      let changed = false
      let armed = false
      const fail = (i: number, id: string, code: 'not-found' | 'conflict', reason: string) => {
        results.push({ id, status: 'failed', code, reason })
        refused.push({ location: 'body', name: `results/${i}/commandId`, reason: `${code}: ${reason}` })
      }
      body.results.forEach((r, i) => {
        const id = String(r.commandId)
        const c = repos.gateway.command(r.commandId)
        // Results are taken only for commands given to this agent and still awaiting one.
        if (!c || c.agent_id !== agentId) return fail(i, id, 'not-found', `Command ${id} is unknown to this agent.`)
        const timedOut = c.status === 'Failed' && c.result_message === NO_RESULT
        if (c.status !== 'Delivered' && !timedOut) {
          const why = c.status === 'Pending' ? 'was never delivered' : c.status === 'Cancelled' ? 'was cancelled' : `was already reported as ${c.status}`
          return fail(i, id, 'conflict', `Command ${id} ${why}.`)
        }
        const output = c.type === 'FetchDebugLogs' && typeof r.output === 'string' ? r.output : null
        repos.gateway.completeCommand({ id: c.id, status: r.status, now, message: r.message ?? null, hasOutput: output !== null ? 1 : 0 })
        if (output !== null) repos.gateway.addDebugLog(agentId, c.id, now, output, DEBUG_LOGS_KEPT)
        if (r.status === 'Failed') {
          events.push(hostEvent('commandFailed', ref, `${c.type} command ${c.id} failed on ${agent.host_identifier}: ${r.message || 'no message'}.`))
        } else if (c.type === 'SetMode') {
          const wanted = commandView(c).parameters.mode
          if (wanted && wanted !== mode) {
            events.push(modeEvent(ref, mode, wanted, c.created_by))
            armed ||= wanted === 'Armed'
            mode = wanted
          }
          repos.gateway.setMode(agentId, wanted ?? mode, now)
        } else if (c.type === 'UpdatePolicy') {
          repos.gateway.setConfigured(agentId, now)
        }
        changed = true
        results.push({ id, status: 'done', code: null, reason: null })
      })
      if (!changed) {
        // Nothing taken: a refusal (its repeats are counted, not written, in the audit trail).
        const unknown = refused.every((e) => e.reason.startsWith('not-found'))
        throw problem(unknown ? 'not-found' : 'conflict', unknown ? 'No result is for a command of this agent.' : 'No result is for a command of this agent awaiting its result.', {
          errors: refused.slice(0, MAX_LISTED_REFUSALS),
        })
      }
      repos.agentState.refreshAgent(agentId)
      if (armed && mode === 'Armed') {
        for (const p of repos.gateway.presentPeripherals(agentId)) if (!p.approved) events.push(unapprovedEvent(ref, p))
      }
      repos.events.record(now, events, agentId)
      const failed = results.filter((r) => r.status === 'failed').length
      audit(req, {
        description: `Agent "${agent.host_identifier}" reported ${body.results.length} command result(s)${failed ? `, ${failed} refused` : ''}`,
        details: { results: body.results.map((r, i) => ({ commandId: r.commandId, status: r.status, message: r.message ?? null, answer: results[i].code ?? 'done' })) },
        user: `agent:${agent.uuid}`,
        asset: agentAsset(agent),
      })
      return { succeeded: results.length - failed, failed, results }
    })()
  }

  return {
    /**
     * The gateway's limits, checked before anything else (429): an address with too many
     * failed enrollments this minute, an agent checking in again too soon (whatever its body).
     */
    admit(req: FastifyRequest, op: Pick<Operation, 'gatewayLimit'>, now: number) {
      if (op.gatewayLimit === 'enrollment') {
        const address = limitKey(req.ip)
        const wait = failedEnrollments.blockedFor(address, now)
        if (wait > 0) throw problem('rate-limited', `Too many failed enrollments from this address; retry in ${wait} seconds.`, { headers: { 'retry-after': String(wait) } })
        for (const [limiter, key, where] of [
          [enrollmentsPerAddress, address, 'from this address'],
          [enrollments, '', 'to this server'],
        ] as const) {
          const r = limiter.hit(key, now)
          if (r.exceeded) throw problem('rate-limited', `More than ${r.max} enrollments a minute ${where}; retry in ${r.resetSeconds} seconds.`, { headers: { 'retry-after': String(r.resetSeconds) } })
        }
        return
      }
      const id = req.agent!.id
      const budget = agentBudget.hit(String(id), now)
      if (budget.exceeded) {
        throw problem('rate-limited', `Too many requests from this agent (${budget.max} per window); retry in ${budget.resetSeconds} seconds.`, {
          headers: { 'retry-after': String(budget.resetSeconds) },
        })
      }
      if (op.gatewayLimit === 'result-bytes') {
        // Counted as they arrive, valid or not: the day's bytes bound what results can store.
        const day = Math.floor(now / DAY_MS)
        const bytes = Number(req.headers['content-length'] ?? 0) || 0
        const used = resultBytes.get(id)
        const today = used && used.day === day ? used.bytes : 0
        if (today + bytes > config.agents.resultBytesPerDay) {
          const wait = Math.max(1, Math.ceil(((day + 1) * DAY_MS - now) / 1000))
          throw problem('rate-limited', `This agent sent ${today} bytes of command results today; at most ${config.agents.resultBytesPerDay} a day (UTC). Retry in ${wait} seconds.`, {
            headers: { 'retry-after': String(wait) },
          })
        }
        resultBytes.set(id, { day, bytes: today + bytes })
      } else if (op.gatewayLimit === 'check-in') {
        const id = req.agent!.id
        const minMs = config.agents.minCheckInSeconds * 1000
        const last = lastCheckIn.get(id)
        if (last !== undefined && now - last < minMs) {
          const wait = Math.max(1, Math.ceil((minMs - (now - last)) / 1000))
          throw problem('rate-limited', `Check in at most every ${config.agents.minCheckInSeconds} seconds; retry in ${wait} seconds.`, { headers: { 'retry-after': String(wait) } })
        }
        lastCheckIn.set(id, now)
      }
    },
    /** The credential is one held for an Administrator's approval (a refused agent call's only extra read). */
    isHeld: (token: string | undefined) => !!token?.startsWith(`${AGENT_PREFIX}_`) && repos.gateway.heldReEnrollmentByCredential(sha256(token)) !== undefined,
    /** Counts an enrollment answered with an error (a wrong secret, an invalid body, ...). */
    enrollmentFailed: (ip: string, now: number) => failedEnrollments.fail(limitKey(ip), now),
    enroll,
    decideReEnrollment,
    checkIn,
    reportResults,
    flushHeartbeats,
    /** Forgets what no longer matters: expired enrollment windows and old check-in times. */
    prune(now: number) {
      failedEnrollments.prune(now)
      const minMs = config.agents.minCheckInSeconds * 1000
      for (const [id, ms] of lastCheckIn) if (now - ms >= minMs) lastCheckIn.delete(id)
      const day = Math.floor(now / DAY_MS)
      for (const [id, used] of resultBytes) if (used.day !== day) resultBytes.delete(id)
      for (const [id, used] of errorsStored) if (used.day !== day) errorsStored.delete(id)
    },
  }
}
export type AgentGateway = ReturnType<typeof agentGateway>
