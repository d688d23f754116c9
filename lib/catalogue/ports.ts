// The storage the catalogue service needs; db/catalogue.ts implements it on SQLite.

export type CatalogueKind = 'KnownAttackTool' | 'VulnerableDevice'

export interface CatalogueRow {
  id: string
  kind: CatalogueKind
  vid: string
  pid: string
  name: string
  vulnerability: string | null
  severity: number
  reference: string | null
  built_in: number
  created_ms: number
  created_by: string
}

export type NewCatalogueEntry = Pick<CatalogueRow, 'kind' | 'vid' | 'pid' | 'name' | 'vulnerability' | 'severity' | 'reference' | 'created_by'>

export interface CatalogueStore {
  all(): Promise<CatalogueRow[]>
  byId(id: string): Promise<CatalogueRow | undefined>
  byKey(kind: CatalogueKind, vid: string, pid: string): Promise<CatalogueRow | undefined>
  /** With `hold`, inside a unit of work: counted to add one, other units counting with `hold` wait for this one to end (PostgreSQL; SQLite's units run one at a time). */
  count(hold?: boolean): Promise<number>
  /** Rejects with an error of code `duplicate-key` when the kind and model are stored already (written meanwhile by another unit of work). */
  insert(entry: NewCatalogueEntry, now: number): Promise<CatalogueRow>
  /** Answers whether an entry was removed. */
  remove(id: string): Promise<boolean>
}

/**
 * What follows a change of the catalogue, in its unit of work: the peripherals of the model
 * and their agents are assessed again (answers how many agents reported the model), and the
 * insights read from the catalogue are computed afresh.
 */
export interface CatalogueFollowers {
  refreshModel(vid: string, pid: string): Promise<number>
  /** Drops a kept insight (and its variants) that a change made stale. */
  invalidateInsight(name: string): Promise<void>
}
