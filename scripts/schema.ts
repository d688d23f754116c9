// Writes db/schema.sql: the schema a fresh database has after every migration of
// db/migrations, one statement each in a stable order, so that a reader sees the current
// shape of each table in one place (tests/schema.test.ts fails when the file is stale).
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import Database from 'better-sqlite3'
import { migrate } from '../db/index.js'
import { projectRoot } from '../lib/paths.js'

export const schemaFile = path.join(projectRoot, 'db', 'schema.sql')

type Entry = { type: string; name: string; tbl_name: string; sql: string | null }

// Tables (plain and virtual) first, then what hangs off them, each group by name.
const order: Record<string, number> = { table: 0, view: 1, index: 2, trigger: 3 }

/** The current schema as the text of db/schema.sql. */
export function currentSchema(): string {
  const db = new Database(':memory:')
  try {
    const version = migrate(db)
    // FTS5 keeps its index in shadow tables it creates and owns (`<name>_data`, ...): they
    // follow from the CREATE VIRTUAL TABLE statement, so they are left out, as are SQLite's
    // own tables (sqlite_sequence, sqlite_stat1) and automatic indexes (no SQL).
    const shadow = new Set((db.prepare('PRAGMA table_list').all() as { name: string; type: string; schema: string }[]).filter((t) => t.schema === 'main' && t.type === 'shadow').map((t) => t.name))
    const entries = (db.prepare('SELECT type, name, tbl_name, sql FROM sqlite_master').all() as Entry[])
      .filter((e) => e.sql !== null && !e.name.startsWith('sqlite_') && !shadow.has(e.name) && !shadow.has(e.tbl_name))
      .sort((a, b) => order[a.type] - order[b.type] || cmp(a.tbl_name, b.tbl_name) || cmp(a.name, b.name))
    const lines = [
      '-- The schema after every migration of db/migrations (schema version ' + version + ').',
      '-- Written by `npm run schema` (scripts/schema.ts); do not edit: change a migration and run it again.',
      '',
    ]
    for (const e of entries) lines.push(e.sql!.trim() + ';', '')
    return lines.join('\n')
  } finally {
    db.close()
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  fs.writeFileSync(schemaFile, currentSchema())
  console.log(`wrote ${path.relative(process.cwd(), schemaFile)}`)
}
