// The catalogue of known attack tools and vulnerable devices on PostgreSQL: the same methods
// and answers as db/catalogue.ts (built-in entries come with migration 003).
import crypto from 'node:crypto'
import type { CatalogueRepo } from '../catalogue.js'
import type { CatalogueKind, CatalogueRow, NewCatalogueEntry } from '../../lib/catalogue/ports.js'
import type { Async } from '../unit-of-work.js'
import type { Postgres } from './connection.js'
import { refusedAsDuplicate } from './duplicates.js'
import { holdLimit } from './limits.js'

type Row = CatalogueRow & Record<string, unknown>

export function pgCatalogueRepo(db: Postgres) {
  const port = {
    // Byte order, as SQLite's.
    all: () => db.query<Row>('SELECT * FROM catalogue ORDER BY kind COLLATE "C", vid COLLATE "C", pid COLLATE "C"'),
    byId: (id: string) => db.one<Row>('SELECT * FROM catalogue WHERE id = $1', [id]),
    byKey: (kind: CatalogueKind, vid: string, pid: string) => db.one<Row>('SELECT * FROM catalogue WHERE kind = $1 AND vid = $2 AND pid = $3', [kind, vid, pid]),
    async count(hold?: boolean) {
      if (hold) await holdLimit(db, 'catalogue')
      return (await db.value<number>('SELECT count(*) FROM catalogue')) ?? 0
    },
    async insert(entry: NewCatalogueEntry, now: number): Promise<CatalogueRow> {
      const row: CatalogueRow = { ...entry, id: crypto.randomUUID(), built_in: 0, created_ms: now }
      // The same kind and model added at once by another unit of work: refused by UNIQUE (kind, vid, pid).
      await refusedAsDuplicate('catalogue_kind_vid_pid_key', () =>
        db.run(
          `INSERT INTO catalogue (id, kind, vid, pid, name, vulnerability, severity, reference, built_in, created_ms, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $10)`,
          [row.id, row.kind, row.vid, row.pid, row.name, row.vulnerability, row.severity, row.reference, row.created_ms, row.created_by],
        ),
      )
      return row
    },
    remove: async (id: string) => (await db.run('DELETE FROM catalogue WHERE id = $1', [id])) > 0,
  }
  return port satisfies Async<CatalogueRepo>
}
export type PgCatalogueRepo = ReturnType<typeof pgCatalogueRepo>
