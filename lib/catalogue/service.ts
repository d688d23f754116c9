// The catalogue of known attack tools and vulnerable devices: listing, adding and removing
// entries. A change reassesses the model's peripherals and their agents and makes the
// vulnerable-peripherals insight stale, all in the change's unit of work. Takes plain
// inputs, so it runs without Fastify.
import type { components } from '../../generated/openapi.js'
import { problem } from '../errors.js'
import type { Context } from '../platform/context.js'
import { VULNERABLE_INSIGHT } from '../insights/rules.js'
import type { AuditTrail, UnitOfWork } from '../platform/ports.js'
import type { CatalogueFollowers, CatalogueRow, CatalogueStore } from './ports.js'
import { entryAsset, entryView } from './views.js'

type NewEntry = components['schemas']['CatalogueEntryCreate']

export const MAX_CATALOGUE_ENTRIES = 10_000
const defaultSeverity = { KnownAttackTool: 2, VulnerableDevice: 3 } as const

export interface CatalogueDeps {
  catalogue: CatalogueStore
  followers: CatalogueFollowers
  uow: UnitOfWork
  audit: AuditTrail
  now?: () => number
}

export function catalogueService(deps: CatalogueDeps) {
  const { catalogue, followers, uow, audit } = deps
  const now = deps.now ?? Date.now

  /** Peripherals of the model, their agents and the kept vulnerable-peripherals insight follow a change at once. */
  async function modelChanged(r: CatalogueRow): Promise<number> {
    await followers.invalidateInsight(VULNERABLE_INSIGHT)
    return followers.refreshModel(r.vid, r.pid)
  }

  return {
    list: (): Promise<CatalogueRow[]> => catalogue.all(),

    /** Adds an entry; one per kind and VID:PID, at most MAX_CATALOGUE_ENTRIES. `by` names who added it. */
    async add(ctx: Context, by: string, body: NewEntry): Promise<CatalogueRow> {
      const vid = body.vid.toUpperCase()
      const pid = body.pid.toUpperCase()
      const taken = () => problem('conflict', `The catalogue already has a ${body.kind} entry for ${vid}:${pid}.`)
      return uow
        .run(async () => {
          if (await catalogue.byKey(body.kind, vid, pid)) throw taken()
          if ((await catalogue.count(true)) >= MAX_CATALOGUE_ENTRIES) throw problem('conflict', `The catalogue is full (${MAX_CATALOGUE_ENTRIES} entries); remove one first.`)
          const created = await catalogue.insert(
            {
              kind: body.kind,
              vid,
              pid,
              name: body.name,
              vulnerability: body.vulnerability ?? null,
              severity: body.severity ?? defaultSeverity[body.kind],
              reference: body.reference ?? null,
              // Integration tokens act as `token:<name>`, which may be longer than the field.
              created_by: by.slice(0, 100),
            },
            now(),
          )
          const agents = await modelChanged(created)
          await audit.record(ctx, {
            description: `Catalogue entry added: ${created.kind} ${vid}:${pid} "${created.name}" (${agents} agent(s) reported this model)`,
            details: { ...entryView(created), agentsRecomputed: agents },
            asset: entryAsset(created),
          })
          return created
        })
        .catch((err) => {
          // Added by another request between the look-up and the insert (PostgreSQL's unique
          // index refused this one): the conflict the look-up would have found.
          throw (err as { code?: string }).code === 'duplicate-key' ? taken() : err
        })
    },

    /** Removes an entry by id; answers it as it was. */
    async remove(ctx: Context, entryId: string): Promise<CatalogueRow> {
      const id = entryId.toLowerCase()
      return uow.run(async () => {
        const found = await catalogue.byId(id)
        if (!found) throw problem('not-found', `No catalogue entry ${id}.`)
        await catalogue.remove(id)
        const agents = await modelChanged(found)
        await audit.record(ctx, {
          description: `Catalogue entry removed: ${found.kind} ${found.vid}:${found.pid} "${found.name}" (${agents} agent(s) reported this model)`,
          details: { ...entryView(found), agentsRecomputed: agents },
          asset: entryAsset(found),
        })
        return found
      })
    },
  }
}

export type CatalogueService = ReturnType<typeof catalogueService>
