// Catalogue entries as the contract shows them.
import type { components } from '../../generated/openapi.js'
import type { AuditAsset } from '../platform/ports.js'
import { iso } from '../time.js'
import type { CatalogueRow } from './ports.js'

export type CatalogueEntryView = components['schemas']['CatalogueEntry']

export const entryView = (r: CatalogueRow): CatalogueEntryView => ({
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

export const entryAsset = (r: CatalogueRow): AuditAsset => ({ key: r.id, name: r.name, type: 'Peripheral', subType: 'None', detail: 'Setting' })
