// The catalogue of known attack tools and vulnerable devices (by VID/PID).
import crypto from 'node:crypto'
import type { DB } from './index.js'
import type { CatalogueKind, CatalogueRow, NewCatalogueEntry } from '../lib/catalogue/ports.js'

export function catalogueRepo(db: DB) {
  const all = db.prepare<[], CatalogueRow>('SELECT * FROM catalogue ORDER BY kind, vid, pid')
  const byId = db.prepare<[string], CatalogueRow>('SELECT * FROM catalogue WHERE id = ?')
  const byKey = db.prepare<[string, string, string], CatalogueRow>('SELECT * FROM catalogue WHERE kind = ? AND vid = ? AND pid = ?')
  const count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM catalogue')
  const insert = db.prepare(
    `INSERT INTO catalogue (id, kind, vid, pid, name, vulnerability, severity, reference, built_in, created_ms, created_by)
     VALUES (@id, @kind, @vid, @pid, @name, @vulnerability, @severity, @reference, 0, @created_ms, @created_by)`,
  )
  const remove = db.prepare<[string]>('DELETE FROM catalogue WHERE id = ?')
  return {
    all: () => all.all(),
    byId: (id: string) => byId.get(id),
    byKey: (kind: CatalogueKind, vid: string, pid: string) => byKey.get(kind, vid, pid),
    count: () => count.get()!.n,
    insert(entry: NewCatalogueEntry, now: number): CatalogueRow {
      const row: CatalogueRow = { ...entry, id: crypto.randomUUID(), built_in: 0, created_ms: now }
      insert.run(row)
      return row
    },
    remove: (id: string) => remove.run(id).changes > 0,
  }
}
export type CatalogueRepo = ReturnType<typeof catalogueRepo>
