import type { FastifyRequest } from 'fastify'
import type { CatalogueRow } from '../db/catalogue.js'
import { audit } from '../lib/audit.js'
import { problem } from '../lib/errors.js'
import { iso } from '../lib/time.js'
import type { Handlers } from './types.js'

export const MAX_CATALOGUE_ENTRIES = 10_000
const defaultSeverity = { KnownAttackTool: 2, VulnerableDevice: 3 } as const

const entryView = (r: CatalogueRow) => ({
  id: r.id,
  kind: r.kind,
  vid: r.vid,
  pid: r.pid,
  name: r.name,
  vulnerability: r.vulnerability,
  severity: r.severity,
  reference: r.reference,
  builtIn: r.built_in === 1,
  creationTime: iso(r.created_ms),
  creationTimeEpoch: r.created_ms,
  createdBy: r.created_by,
})

const entryAsset = (r: CatalogueRow) => ({ key: r.id, name: r.name, type: 'Peripheral', subType: 'None', detail: 'Setting' })

/** Peripherals of the model, their agents and the cached vulnerable-peripherals insight follow a change at once. */
function modelChanged(req: FastifyRequest, r: CatalogueRow): number {
  req.server.repos.insights.invalidate('vulnerablePeripherals')
  return req.server.repos.agentState.refreshModel(r.vid, r.pid)
}

export const catalogueHandlers: Handlers<'getCatalogue' | 'addCatalogueEntry' | 'deleteCatalogueEntry'> = {
  async getCatalogue(req) {
    return req.server.repos.catalogue.all().map(entryView)
  },

  async addCatalogueEntry(req) {
    const { repos, db } = req.server
    const body = req.body
    const vid = body.vid.toUpperCase()
    const pid = body.pid.toUpperCase()
    const row = db.transaction(() => {
      if (repos.catalogue.byKey(body.kind, vid, pid)) {
        throw problem('conflict', `The catalogue already has a ${body.kind} entry for ${vid}:${pid}.`)
      }
      if (repos.catalogue.count() >= MAX_CATALOGUE_ENTRIES) {
        throw problem('conflict', `The catalogue is full (${MAX_CATALOGUE_ENTRIES} entries); remove one first.`)
      }
      const created = repos.catalogue.insert(
        {
          kind: body.kind,
          vid,
          pid,
          name: body.name,
          vulnerability: body.vulnerability ?? null,
          severity: body.severity ?? defaultSeverity[body.kind],
          reference: body.reference ?? null,
          // Integration tokens act as `token:<name>`, which may be longer than the field.
          created_by: req.principal!.name.slice(0, 100),
        },
        Date.now(),
      )
      const agents = modelChanged(req, created)
      audit(req, {
        description: `Catalogue entry added: ${created.kind} ${vid}:${pid} "${created.name}" (${agents} agent(s) reported this model)`,
        details: { ...entryView(created), agentsRecomputed: agents },
        asset: entryAsset(created),
      })
      return created
    })()
    return entryView(row)
  },

  async deleteCatalogueEntry(req) {
    const { repos, db } = req.server
    const id = req.params.entryId.toLowerCase()
    const row = db.transaction(() => {
      const found = repos.catalogue.byId(id)
      if (!found) throw problem('not-found', `No catalogue entry ${id}.`)
      repos.catalogue.remove(id)
      const agents = modelChanged(req, found)
      audit(req, {
        description: `Catalogue entry removed: ${found.kind} ${found.vid}:${found.pid} "${found.name}" (${agents} agent(s) reported this model)`,
        details: { ...entryView(found), agentsRecomputed: agents },
        asset: entryAsset(found),
      })
      return found
    })()
    return entryView(row)
  },
}
