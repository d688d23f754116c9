// backend: sqlite-only — db/schema.sql, the schema SQLite's migrations give
import fs from 'node:fs'
import t from 'tap'
import Database from 'better-sqlite3'
import { migrate } from '../db/index.js'
import { currentSchema, schemaFile } from '../scripts/schema.js'

t.test('db/schema.sql is the schema the migrations give', async (t) => {
  const committed = fs.readFileSync(schemaFile, 'utf8')
  const fresh = currentSchema()
  // The diff names what changed; the message says how to fix it.
  t.equal(committed, fresh, committed === fresh ? 'db/schema.sql is current' : 'db/schema.sql is stale: run npm run schema')
})

t.test('db/schema.sql builds the same database as the migrations', async (t) => {
  // The file is a faithful picture: executed on its own it gives the same sqlite_master.
  const dump = (db: Database.Database) => db.prepare('SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name').all()
  const fromMigrations = new Database(':memory:')
  const fromFile = new Database(':memory:')
  t.teardown(() => {
    fromMigrations.close()
    fromFile.close()
  })
  migrate(fromMigrations)
  fromFile.exec(fs.readFileSync(schemaFile, 'utf8'))
  t.same(dump(fromFile), dump(fromMigrations))
})
