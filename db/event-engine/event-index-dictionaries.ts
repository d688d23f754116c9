// The event index's dictionaries (db/event-engine/event-index.ts): the kinds of events and audit records,
// and the events' sources and documents, each given an id on first sight.
import { cacheIn } from '../../lib/platform/cache.js'
import type { DB } from '../index.js'
import { kindColumns, kindsTable, type AuditKind, type EventKind, type IndexerOptions } from './event-index-structures.js'
import type { RecordTable } from '../../lib/events/ports.js'

/** 53-bit string hash (cyrb53): finds a document by its whole key in one index probe. */
export function hash53(text: string): number {
  let h1 = 0xdeadbeef
  let h2 = 0x41c6ce57
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return 4294967296 * (2097151 & h2) + (h1 >>> 0)
}

const SEP = '\u0001'
const NULL = '\u0002'
const keyOf = (values: readonly unknown[]) => values.map((v) => (v === null || v === undefined ? NULL : String(v))).join(SEP)

/** The dictionaries of an indexer: kinds all kept in memory, sources and documents remembered up to a bound. */
export function indexDictionaries(db: DB, opts: IndexerOptions) {
  // ---- kinds (few: all of them are kept in memory) ----
  const kindIds = { events: new Map<string, number>(), audit_trail: new Map<string, number>() }
  const kindRows = { events: new Map<number, EventKind>(), audit_trail: new Map<number, AuditKind>() }
  const kindsMax = { events: 0, audit_trail: 0 }
  const loadKinds = (table: RecordTable) => {
    const rows = db.prepare(`SELECT * FROM ${kindsTable[table]} WHERE id > ? ORDER BY id`).all(kindsMax[table]) as (EventKind & AuditKind)[]
    for (const r of rows) {
      kindIds[table].set(keyOf(kindColumns[table].map((c) => r[c as keyof typeof r])), r.id)
      ;(kindRows[table] as Map<number, EventKind | AuditKind>).set(r.id, r)
      kindsMax[table] = r.id
    }
  }
  const insertKind = {
    events: db.prepare(`INSERT INTO event_kinds (${kindColumns.events.join(', ')}) VALUES (${kindColumns.events.map(() => '?').join(', ')})`),
    audit_trail: db.prepare(`INSERT INTO audit_kinds (${kindColumns.audit_trail.join(', ')}) VALUES (${kindColumns.audit_trail.map(() => '?').join(', ')})`),
  }
  const latestKind = { events: db.prepare('SELECT max(id) FROM event_kinds').pluck(), audit_trail: db.prepare('SELECT max(id) FROM audit_kinds').pluck() }
  /** The id of a kind, inserted when new (another process may have added it: read first). */
  const kindId = (table: RecordTable, values: unknown[]): number => {
    const key = keyOf(values)
    let id = kindIds[table].get(key)
    if (id !== undefined) return id
    loadKinds(table)
    id = kindIds[table].get(key)
    if (id !== undefined) return id
    id = Number(insertKind[table].run(...values).lastInsertRowid)
    loadKinds(table)
    return id
  }
  /** Every kind of a table (read again when another connection added some). */
  const kinds = <T extends RecordTable>(table: T): Map<number, T extends 'events' ? EventKind : AuditKind> => {
    if (((latestKind[table].get() as number | null) ?? 0) > kindsMax[table]) loadKinds(table)
    return kindRows[table] as any
  }

  // ---- sources and documents (events only) ----
  // A miss is one index probe; another connection rewriting them calls forget().
  const sourceCache = cacheIn<string, number>(opts.caches, {
    name: 'event-index-sources',
    signal: 'another connection rewriting the sources (forget)',
    max: opts.sourceCache ?? 50_000,
    maxBytes: 16 * 1024 * 1024,
    sizeOf: (_, key) => 24 + 2 * key.length,
  })
  const docCache = cacheIn<string, number>(opts.caches, {
    name: 'event-index-documents',
    signal: 'another connection rewriting the documents (forget)',
    max: opts.docCache ?? 20_000,
    maxBytes: 16 * 1024 * 1024,
    sizeOf: (_, key) => 24 + 2 * key.length,
  })
  const findSource = db.prepare<[string, string | null, string | null], number>('SELECT id FROM event_sources WHERE entity_id = ? AND asset_key IS ? AND asset_name IS ?').pluck()
  const insertSource = db.prepare<[string, string | null, string | null]>('INSERT INTO event_sources (entity_id, asset_key, asset_name) VALUES (?, ?, ?)')
  const insertSourceFts = db.prepare<[number, string, string | null, string | null]>('INSERT INTO event_sources_fts (rowid, entity_id, asset_key, asset_name) VALUES (?, ?, ?, ?)')
  const findDocs = db.prepare<[number], { id: number; kind: number; source: number; details: string; peripheral_asset_id: string | null }>(
    'SELECT d.id, d.kind, d.source, t.details, t.peripheral_asset_id FROM event_docs d JOIN event_doc_texts t ON t.id = d.id WHERE d.hash = ?',
  )
  const insertDoc = db.prepare<[number, number, number]>('INSERT INTO event_docs (hash, kind, source) VALUES (?, ?, ?)')
  const insertDocText = db.prepare<[number, string, string | null]>('INSERT INTO event_doc_texts (id, details, peripheral_asset_id) VALUES (?, ?, ?)')
  const insertDocFts = db.prepare<[number, string, string | null]>('INSERT INTO event_docs_fts (rowid, details, peripheral_asset_id) VALUES (?, ?, ?)')

  const sourceId = (entity: string, assetKey: string | null, assetName: string | null, delta: { newSources: [number, string | null][] }): number => {
    const key = keyOf([entity, assetKey, assetName])
    let id = sourceCache.get(key)
    if (id !== undefined) return id
    id = findSource.get(entity, assetKey, assetName)
    if (id === undefined) {
      id = Number(insertSource.run(entity, assetKey, assetName).lastInsertRowid)
      insertSourceFts.run(id, entity, assetKey, assetName)
      delta.newSources.push([id, assetKey])
    }
    sourceCache.set(key, id)
    return id
  }
  const docId = (kind: number, source: number, device: string | null, details: string, delta: { newDocs: [number, number, number][] }): number => {
    const key = keyOf([kind, source, device, details])
    let id = docCache.get(key)
    if (id !== undefined) return id
    const h = hash53(key)
    id = findDocs.all(h).find((d) => d.kind === kind && d.source === source && d.peripheral_asset_id === device && d.details === details)?.id
    if (id === undefined) {
      id = Number(insertDoc.run(h, kind, source).lastInsertRowid)
      insertDocText.run(id, details, device)
      insertDocFts.run(id, details, device)
      delta.newDocs.push([id, kind, source])
    }
    docCache.set(key, id)
    return id
  }

  return {
    kindId,
    kinds,
    sourceId,
    docId,
    /** Forgets remembered sources and documents (after another connection rewrote them). */
    forget() {
      sourceCache.clear()
      docCache.clear()
    },
  }
}
export type IndexDictionaries = ReturnType<typeof indexDictionaries>
