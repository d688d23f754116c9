// The asset producer: snapshots of every asset (ReplayAll) and the assets whose location
// changed since it was last published (SendMonitorOldLocation), queued for the alarm
// destinations subscribed to the asset feed through the alarm outbox.
import crypto from 'node:crypto'
import type { components } from '../../generated/openapi.js'
import type { Context } from '../platform/context.js'
import { iso } from '../time.js'
import { isIp } from './address.js'
import type { AgentlessDeps } from './deps.js'
import type { AgentAssetRow, AssetType, ConnectionAssetRow, PeripheralAssetRow } from './ports.js'
import { setImmediate as pause } from 'node:timers/promises'

type Schemas = components['schemas']
type Message = Schemas['AssetFeedMessage']
type Location = Schemas['AssetFeedLocation']
type Trigger = Message['trigger']

// Assets per transaction: a large fleet is queued in steps, other requests run between them.
const CHUNK = 500

const cut = (v: string | null | undefined, max: number) => (v === null || v === undefined ? null : v.slice(0, max))

function agentLocation(a: AgentAssetRow): Location {
  return {
    ipAddress: cut(a.local_ip_address, 64),
    hostName: cut(a.host_identifier, 253),
    switchIp: cut(a.switch_ip, 64),
    switchName: cut(a.switch_name, 256),
    switchPortId: cut(a.port_id, 256),
    switchPortName: cut(a.port_name, 256),
    agentUuid: null,
    agentHostIdentifier: null,
  }
}

const peripheralLocation = (a: AgentAssetRow): Location => ({ ...agentLocation(a), agentUuid: a.uuid, agentHostIdentifier: cut(a.host_identifier, 256) })

function hostLocation(c: ConnectionAssetRow): Location {
  const ip = isIp(c.address)
  return {
    ipAddress: ip ? cut(c.address, 64) : null,
    hostName: ip ? null : cut(c.address, 253),
    switchIp: null,
    switchName: null,
    switchPortId: null,
    switchPortName: null,
    agentUuid: null,
    agentHostIdentifier: null,
  }
}

/** The parts of a location whose change is a move: the address, the switch and its port; for a peripheral, its agent. */
const whereabouts = (type: AssetType, l: Location) =>
  JSON.stringify(type === 'Peripheral' ? [l.agentUuid] : [l.ipAddress, l.hostName && type === 'AgentlessHost' ? l.hostName : null, l.switchIp, l.switchPortId, l.switchPortName])

/** A peripheral is the same device on whichever agent when it has a serial number. */
const peripheralKey = (p: PeripheralAssetRow) => (p.serial_number ? `usb:${p.vid}:${p.pid}:${p.serial_number}` : `${p.agent_uuid}/${p.device_id}`)

function peripheralView(p: PeripheralAssetRow): Schemas['AssetFeedPeripheral'] {
  return {
    id: `${p.agent_uuid}/${p.device_id}`.slice(0, 256),
    deviceID: p.device_id.slice(0, 512),
    vid: p.vid.slice(0, 8),
    pid: p.pid.slice(0, 8),
    serialNumber: cut(p.serial_number, 256),
    vendor: cut(p.gui_vid, 256),
    product: cut(p.gui_pid, 256),
    devIcon: p.dev_icon,
    approved: p.approved === 1,
    present: p.present === 1,
    isKnownAttackTool: p.is_attack_tool === 1,
    isVulnerablePeripheral: p.is_vulnerable === 1,
  }
}

interface Tally {
  assets: number
  agents: number
  peripherals: number
  hosts: number
  deliveries: number
}

function parseLocation(json: string | undefined): Location | null {
  if (json === undefined) return null
  try {
    return JSON.parse(json) as Location
  } catch {
    return null
  }
}

/**
 * Builds and queues the messages, a chunk of assets per transaction. `changedOnly`:
 * only assets whose location moved since last published (SendMonitorOldLocation).
 * Locations are recorded only when some destination receives the feed.
 */
async function produce(deps: AgentlessDeps, trigger: Trigger, now: number): Promise<Tally> {
  const { store, uow } = deps
  const changedOnly = trigger === 'SendMonitorOldLocation'
  const kind: Message['kind'] = changedOnly ? 'locationChanged' : 'snapshot'
  const tally: Tally = { assets: 0, agents: 0, peripherals: 0, hosts: 0, deliveries: 0 }
  const base = (type: AssetType, id: string, name: string | null, parentId: string | null, location: Location, previous: Location | null) => ({
    messageId: crypto.randomUUID(),
    kind,
    trigger,
    time: iso(now),
    timeEpoch: now,
    assetType: type,
    assetId: id.slice(0, 256),
    name: cut(name, 256),
    parentId,
    location,
    previousLocation: changedOnly ? previous : null,
  })

  const step = (build: (record: (type: AssetType, key: string, location: Location) => void) => Promise<Message[]>) =>
    uow.run(async () => {
      const records: [AssetType, string, string][] = []
      const messages = await build((type, key, location) => records.push([type, key, JSON.stringify(location)]))
      if (messages.length === 0) return
      const queued = await deps.assets.publishAssets(now, messages)
      tally.deliveries += queued
      if (queued === 0) return
      for (const [type, key, location] of records) await store.putLocation(type, key, location, now)
      for (const m of messages) {
        tally.assets++
        if (m.assetType === 'Agent') tally.agents++
        if (m.assetType === 'AgentlessHost') tally.hosts++
        tally.peripherals += m.assetType === 'Peripheral' ? 1 : m.peripherals.length
      }
    })

  for (let after = 0; ; ) {
    const agents = await store.agentsAfter(after, CHUNK)
    if (agents.length === 0) break
    after = agents[agents.length - 1].id
    await step(async (record) => {
      const peripherals = await store.peripheralsOf(agents.map((a) => a.id))
      const byAgent = new Map<number, PeripheralAssetRow[]>()
      for (const p of peripherals) {
        const list = byAgent.get(p.agent_id)
        if (list) list.push(p)
        else byAgent.set(p.agent_id, [p])
      }
      const seenAgents = await store.locations(
        'Agent',
        agents.map((a) => a.uuid),
      )
      const present = peripherals.filter((p) => p.present === 1)
      const seenPeripherals = await store.locations('Peripheral', present.map(peripheralKey))
      const messages: Message[] = []
      const published = new Set<number>()
      for (const a of agents) {
        const location = agentLocation(a)
        const previous = parseLocation(seenAgents.get(a.uuid))
        if (changedOnly && previous && whereabouts('Agent', previous) === whereabouts('Agent', location)) continue
        published.add(a.id)
        record('Agent', a.uuid, location)
        const own = byAgent.get(a.id) ?? []
        for (const p of own) if (p.present === 1) record('Peripheral', peripheralKey(p), peripheralLocation(a))
        messages.push({
          ...base('Agent', a.uuid, a.host_identifier, null, location, previous),
          operationalStatus: a.operational_status,
          connectionStatus: a.connection_status,
          peripherals: own.slice(0, 10_000).map(peripheralView),
        })
      }
      if (changedOnly) {
        // A peripheral on its own: it moved to another agent, or it was never published (and its agent was not just now).
        const agentsById = new Map(agents.map((a) => [a.id, a]))
        for (const p of present) {
          const a = agentsById.get(p.agent_id)!
          const location = peripheralLocation(a)
          const previous = parseLocation(seenPeripherals.get(peripheralKey(p)))
          if (previous ? whereabouts('Peripheral', previous) === whereabouts('Peripheral', location) : published.has(a.id)) continue
          record('Peripheral', peripheralKey(p), location)
          messages.push({
            ...base('Peripheral', `${p.agent_uuid}/${p.device_id}`, p.gui_pid ?? p.caption ?? null, a.uuid, location, previous),
            operationalStatus: null,
            connectionStatus: null,
            peripherals: [],
          })
        }
      }
      return messages
    })
    await pause()
  }

  for (let after = 0; ; ) {
    const hosts = await store.connectionsAfter(after, CHUNK)
    if (hosts.length === 0) break
    after = hosts[hosts.length - 1].id
    await step(async (record) => {
      const seen = await store.locations(
        'AgentlessHost',
        hosts.map((h) => String(h.id)),
      )
      const messages: Message[] = []
      for (const h of hosts) {
        const location = hostLocation(h)
        const previous = parseLocation(seen.get(String(h.id)))
        if (changedOnly && previous && whereabouts('AgentlessHost', previous) === whereabouts('AgentlessHost', location)) continue
        record('AgentlessHost', String(h.id), location)
        messages.push({ ...base('AgentlessHost', String(h.id), h.name, null, location, previous), operationalStatus: null, connectionStatus: h.status, peripherals: [] })
      }
      return messages
    })
    await pause()
  }
  return tally
}

export async function publishAssets(deps: AgentlessDeps, ctx: Context, trigger: Trigger): Promise<Schemas['AssetProducerResult']> {
  const now = Date.now()
  const destinations = await deps.assets.assetSubscribers()
  const tally = destinations === 0 ? { assets: 0, agents: 0, peripherals: 0, hosts: 0, deliveries: 0 } : await produce(deps, trigger, now)
  const what = trigger === 'ReplayAll' ? 'snapshot(s) of every asset' : 'asset(s) whose location changed'
  await deps.audit.record(ctx, {
    description: destinations === 0 ? `${trigger}: no alarm destination is subscribed to assets; nothing queued` : `${trigger}: queued ${tally.assets} ${what} for ${destinations} destination(s)`,
    details: { trigger, agents: tally.agents, peripherals: tally.peripherals, agentlessHosts: tally.hosts, destinations, messagesQueued: tally.deliveries },
  })
  return {
    assetsQueued: tally.assets,
    agents: tally.agents,
    peripherals: tally.peripherals,
    agentlessHosts: tally.hosts,
    destinations,
    messagesQueued: tally.deliveries,
    queuedTime: iso(now),
  }
}
