// The full comparison of check-ins with their agents' stored state: the new state, the
// peripherals reconciled, the reported errors, the events raised and the audit records.
import { unauthenticated } from '../auth.js'
import { iso } from '../time.js'
import { agentAsset } from '../agents/views.js'
import { type AgentRef, hostEvent, modeEvent, presenceEvents, removedEvent, unapprovedEvent } from './events.js'
import { DAY_MS } from './limits.js'
import { modelTooltip, nicsText, reconcile, storedView } from './peripherals.js'
import type { AgentRow, AgentState, EventBatch, EventInput, PresentPeripheral } from './ports.js'
import { ALONE, type Answer, answer, type CheckIn, type Comparison, deliver, type GatewayState, MAX_ERRORS_PER_AGENT_PER_DAY, MAX_PERIPHERALS_PER_AGENT, type Outcome, seatFree } from './state.js'

interface Change {
  from: unknown
  to: unknown
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

async function licenseAfter(s: GatewayState, current: AgentRow['license_status'], reportedAccount: string | null | undefined): Promise<AgentRow['license_status']> {
  const expected = s.license.accountId
  if (expected !== null && reportedAccount && reportedAccount !== expected) return 'Invalid'
  if (current === 'Invalid') return (await seatFree(s)) ? 'Activated' : 'Pending'
  return current
}

/**
 * The full comparison of check-ins with the stored state, one per agent; inside one unit of
 * work. Reads and writes them together (a few statements for all), and answers each one's
 * outcome: its answer, its own refusal, or ALONE (it must run by itself). The same rows,
 * events and audit records as comparing them one after another.
 */
export async function compareAll(s: GatewayState, items: Comparison[]): Promise<{ outcomes: Outcome[]; counted: [number, { day: number; count: number }][] }> {
  const outcomes: Outcome[] = items.map(() => ({ ok: false, err: ALONE }))
  const rows = new Map((await s.store.agents(items.map((c) => c.agentId))).map((r) => [r.id, r]))
  const work: Compared[] = []
  for (const [i, c] of items.entries()) {
    const before = rows.get(c.agentId)
    if (!before) outcomes[i] = { ok: false, err: unauthenticated('The agent no longer exists; enroll again.') }
    // Taking a free seat reads the seats in use: one such check-in at a time.
    else if (before.license_status === 'Invalid' && items.length > 1) continue
    else work.push(await prepare(s, i, c, before))
  }
  if (work.length === 0) return { outcomes, counted: [] }
  const ids = work.map((w) => w.c.agentId)

  await s.store.updateStates(work.map((w) => ({ id: w.c.agentId, before: w.before, state: w.after })))
  // Peripherals: upsert what was reported; the ones left out are no longer present.
  const known = await s.store.knownPeripheralsOf(ids)
  for (const w of work) w.peripherals = reconcile(known.get(w.c.agentId) ?? [], w.c.body.peripherals)
  const touched = await s.store.applyPeripheralsMany(
    work.map((w) => ({ agentId: w.c.agentId, agentUuid: w.before.uuid, changes: w.peripherals!.changes, now: w.c.now, previousMs: w.previousMs })),
    MAX_PERIPHERALS_PER_AGENT,
  )
  const counted: [number, { day: number; count: number }][] = []
  for (const w of work) {
    const errors = reportedErrors(w.c.body)
    if (errors.length) counted.push([w.c.agentId, await storeErrors(s, w.c.agentId, errors, w.c.now)])
  }

  const pending = new Set(await s.store.withPendingCommands(ids))
  for (const w of work) w.delivered = pending.has(w.c.agentId) ? await deliver(s, w.c.agentId, w.c.now) : { commands: [], more: false }
  // Over what the check-ins changed: their peripherals, and every one of an agent whose mode changed.
  const modeChanged = work.filter((w) => w.first || w.before.operational_status !== w.after.operationalStatus).map((w) => w.c.agentId)
  await s.agentState.refreshCheckIns(ids, touched, modeChanged)

  // Present peripherals are read only for the check-ins where one can raise an event: most bring nobody new.
  const armedNow = (w: Compared) => w.after.operationalStatus === 'Armed' && (w.first || w.before.operational_status !== 'Armed')
  const asking = work.filter((w) => w.peripherals!.appeared.size > 0 || armedNow(w)).map((w) => w.c.agentId)
  const present = asking.length ? await s.store.presentPeripheralsOf(asking) : new Map<number, PresentPeripheral[]>()
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
      raised.push(modeEvent(ref, before.operational_status, after.operationalStatus, await s.store.modeRequestedBy(c.agentId, after.operationalStatus)))
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
  await s.events.recordMany(batches)

  for (const w of work) {
    const { c, before, after, first } = w
    const { changes, appeared, gone, missing } = w.peripherals!
    const added = changes.reported.filter((r) => r.id === null).length
    const changed = auditableChanges(before, after, first, { connected: appeared.size, removed: gone.length + missing.length, added })
    if (Object.keys(changed).length > 0) {
      await s.audit.record(c.ctx, {
        description: `Check-in of "${after.hostIdentifier}" changed ${Object.keys(changed).join(', ')}`,
        details: changed,
        user: `agent:${before.uuid}`,
        asset: agentAsset({ uuid: before.uuid, host_identifier: after.hostIdentifier, local_ip_address: c.localIp, running_mode: after.runningMode, os_version: after.osVersion }),
      })
    } else {
      // Changes of address, users or adapters only: events where the contract has them, no audit record.
      c.ctx.audit.audited = true
    }
    outcomes[w.index] = { ok: true, answer: answer(s, before.uuid, c.now, w.delivered!) }
  }
  return { outcomes, counted }
}

/** A check-in's new state for its agent, from its report and the stored row. */
async function prepare(s: GatewayState, index: number, c: Comparison, before: AgentRow): Promise<Compared> {
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
    licenseStatus: await licenseAfter(s, before.license_status, body.licenseAccountId),
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
    checkInSeconds: s.config.checkInSeconds,
    lastUpdatedMs: now,
    stateDigest: digest,
  }
  return { index, c, before, after, first, previousMs }
}

/** Stores an agent's reported errors, up to its allowance of the day (a flood cannot grow the table without end). */
async function storeErrors(s: GatewayState, agentId: number, errors: ReturnType<typeof reportedErrors>, now: number) {
  const day = Math.floor(now / DAY_MS)
  const used = s.errorsStored.get(agentId)
  const today = used && used.day === day ? used.count : 0
  const kept = errors.slice(0, Math.max(0, MAX_ERRORS_PER_AGENT_PER_DAY - today))
  await s.store.addErrors(agentId, kept)
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
