// Risk insights on peripheral models: the rare ones (on few hosts) and those of the
// catalogue's attack tools and vulnerable devices, each with some of its hosts.
import type { Statement } from 'better-sqlite3'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { DB } from './index.js'
import type { HostRow, UncommonModel, UncommonRows, VulnerableModel, VulnerableRows } from '../lib/insights/ports.js'

/** Models (and agents with errors) answered at most. */
export const MAX_MODELS = 1000
const UNCOMMON_HOSTS = 20
const VULNERABLE_HOSTS = 100

// Hubs are infrastructure, not devices someone plugged in: never "uncommon".
const HUB = 4

/** `agentsTotal`: the agents counted (row_counts), which the insights share. */
export function modelStore(db: DB, agentsTotal: Statement<[], { n: number }>) {
  // ---- uncommon peripherals ----
  // Rare models are found model by model (each a seek into the covering index of present
  // peripherals, migration 004) rather than by one GROUP BY over every present peripheral:
  // a model's hosts are counted only up to maxHosts + 1, so a model on every host costs no
  // more than a rare one, and the walk can stop between models to let other work run.
  const nextModel = db.prepare<{ vid: string; pid: string }, { vid: string; pid: string }>('SELECT vid, pid FROM peripherals WHERE present = 1 AND (vid, pid) > (@vid, @pid) ORDER BY vid, pid LIMIT 1')
  const modelHosts = db
    .prepare<{ vid: string; pid: string; limit: number }, number>('SELECT count(*) FROM (SELECT DISTINCT agent_id FROM peripherals WHERE present = 1 AND vid = @vid AND pid = @pid LIMIT @limit)')
    .pluck()
  // Every peripheral of the model on the hosts where it is present, among them those of
  // hubs, which are then left out.
  const modelDetail = db.prepare<
    { vid: string; pid: string },
    {
      gui_vid: string | null
      gui_pid: string | null
      dev_icon: number
      hub: number
      peripherals: number
      present: number
      first_seen: number
      last_seen: number
    }
  >(
    `SELECT max(p.gui_vid) AS gui_vid, max(p.gui_pid) AS gui_pid, max(p.dev_icon) AS dev_icon, max(p.dev_icon = ${HUB}) AS hub,
       count(*) AS peripherals, sum(p.present) AS present, min(p.first_seen_ms) AS first_seen, max(p.last_seen_ms) AS last_seen
     FROM peripherals p WHERE p.vid = @vid AND p.pid = @pid
       AND p.agent_id IN (SELECT agent_id FROM peripherals q WHERE q.vid = @vid AND q.pid = @pid AND q.present = 1)`,
  )
  /**
   * The rare models (on at most `maxHosts` hosts, hubs left out), fewest hosts first, then
   * the latest seen. Yields after each model, so that a caller can spread the walk over
   * several turns of the event loop.
   */
  function* uncommonModels(maxHosts: number): Generator<void, UncommonModel[]> {
    const found: UncommonModel[] = []
    // ('', '') sorts first and is no model counted (nor is any of vid '').
    let at: { vid: string; pid: string } | undefined = { vid: '', pid: '' }
    for (;;) {
      at = nextModel.get(at)
      if (!at) break
      if (at.vid !== '' && at.vid !== '0000') {
        const hosts = modelHosts.get({ ...at, limit: maxHosts + 1 })!
        if (hosts <= maxHosts) {
          const d = modelDetail.get(at)!
          if (!d.hub)
            found.push({
              vid: at.vid,
              pid: at.pid,
              gui_vid: d.gui_vid,
              gui_pid: d.gui_pid,
              dev_icon: d.dev_icon,
              hosts,
              peripherals: d.peripherals,
              present: d.present,
              first_seen: d.first_seen,
              last_seen: d.last_seen,
            })
        }
      }
      yield
    }
    const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0)
    return found.sort((x, y) => x.hosts - y.hosts || y.last_seen - x.last_seen || cmp(x.vid, y.vid) || cmp(x.pid, y.pid))
  }
  const presentHosts = db.prepare<[string, string, number], HostRow>(
    `SELECT a.uuid, a.host_identifier, a.local_ip_address FROM agents a
     WHERE a.id IN (SELECT agent_id FROM peripherals WHERE vid = ? AND pid = ? AND present = 1)
     ORDER BY a.host_identifier COLLATE NOCASE, a.uuid LIMIT ?`,
  )
  function* uncommonSteps(maxHosts: number): Generator<void, UncommonRows> {
    const agentsConsidered = agentsTotal.get()!.n
    // In a fleet this small every model is on few hosts: nothing is uncommon.
    const models = agentsConsidered > maxHosts ? yield* uncommonModels(maxHosts) : []
    const listed: UncommonRows['models'] = []
    for (const m of models.slice(0, MAX_MODELS)) {
      listed.push({ model: m, hosts: presentHosts.all(m.vid, m.pid, UNCOMMON_HOSTS) })
      yield
    }
    return { maxHosts, agentsConsidered, total: models.length, models: listed }
  }

  // ---- vulnerable peripherals ----
  const vulnerableModels = db.prepare<[], VulnerableModel>(
    `SELECT c.id, c.kind, c.vid, c.pid, c.name, c.vulnerability, c.severity,
       max(p.gui_vid) AS gui_vid, max(p.gui_pid) AS gui_pid, max(p.dev_icon) AS dev_icon,
       count(DISTINCT p.agent_id) AS hosts, sum(p.present) AS present, sum(p.approved) AS approved
     FROM catalogue c JOIN peripherals p ON p.vid = c.vid AND p.pid = c.pid
     GROUP BY c.id
     ORDER BY c.severity, hosts DESC, c.kind, c.vid, c.pid`,
  )
  const reportingHosts = db.prepare<[string, string, number], HostRow>(
    `SELECT a.uuid, a.host_identifier, a.local_ip_address FROM agents a
     WHERE a.id IN (SELECT agent_id FROM peripherals WHERE vid = ? AND pid = ?)
     ORDER BY a.host_identifier COLLATE NOCASE, a.uuid LIMIT ?`,
  )

  return {
    uncommonPeripherals(maxHosts: number): UncommonRows {
      const steps = uncommonSteps(maxHosts)
      for (;;) {
        const r = steps.next()
        if (r.done) return r.value
      }
    },

    /**
     * The same, computed in slices of about `sliceMs` of work, each in its own turn of the
     * event loop, so that no request waits behind it for longer than that.
     */
    async uncommonPeripheralsSliced(maxHosts: number, sliceMs = 20): Promise<UncommonRows> {
      const steps = uncommonSteps(maxHosts)
      let since = performance.now()
      for (;;) {
        const r = steps.next()
        if (r.done) return r.value
        if (performance.now() - since >= sliceMs) {
          await nextTurn()
          if (!db.open) throw new Error('The database was closed while the rare models were being computed.')
          since = performance.now()
        }
      }
    },

    /** The catalogue's models that peripherals report, with up to 100 of their hosts each (the first 1,000 models). */
    vulnerablePeripherals(): VulnerableRows {
      const models = vulnerableModels.all()
      return { total: models.length, models: models.slice(0, MAX_MODELS).map((model) => ({ model, hosts: reportingHosts.all(model.vid, model.pid, VULNERABLE_HOSTS) })) }
    },
  }
}
