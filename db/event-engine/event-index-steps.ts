// The event index's catch-up (db/event-engine/event-index.ts): a step indexes the next batch of records
// in one transaction (kinds, block counts, time spans, the events' ids by source and by
// kind, their sources' and documents' counts, their documents by id) and moves the
// high-water mark; the documents of events indexed before event_doc_ids are filled in.
import { FINE_SHIFT, LEVEL_SHIFT, SOURCE_BLOCK_SHIFT, SYNCHRONOUS_FULL, addRollup, kindColumns, rollupTable, type Delta, type IndexerState } from './event-index-structures.js'
import type { RecordTable } from '../../lib/events/ports.js'
import type { IndexDictionaries } from './event-index-dictionaries.js'

/** The steps of an indexer; `apply` brings its summary along with each committed one. */
export function indexSteps(ix: IndexerState, dicts: IndexDictionaries, apply: (table: RecordTable, d: Delta | null) => void) {
  const { db, opts, state, docIds } = ix
  const { kindId, sourceId, docId } = dicts
  const setIndexed = db.prepare<[number, string]>('UPDATE record_index_state SET indexed = ?, stale = 0 WHERE name = ?')

  const addSourceN = db.prepare<[number, number]>('UPDATE event_sources SET n = n + ? WHERE id = ?')
  const insertSourceId = db.prepare<[number, number, number]>('INSERT INTO event_source_ids (blk, source, id) VALUES (?, ?, ?)')
  const insertKindId = db.prepare<[number, number, number]>('INSERT INTO event_kind_ids (blk, kind, id) VALUES (?, ?, ?)')
  const addDocN = db.prepare<[number, number]>('UPDATE event_docs SET n = n + ? WHERE id = ?')
  const fineUpsert = db.prepare<[number, number, number]>(
    'INSERT INTO event_time_spans (sub, min_ms, max_ms) VALUES (?, ?, ?) ON CONFLICT (sub) DO UPDATE SET min_ms = min(min_ms, excluded.min_ms), max_ms = max(max_ms, excluded.max_ms)',
  )

  // ---- rollups ----
  const rollupUpsert = {
    events: db.prepare(`INSERT INTO event_rollup (level, block, kind, n, min_ms, max_ms) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (level, block, kind) DO UPDATE SET n = n + excluded.n, min_ms = min(min_ms, excluded.min_ms), max_ms = max(max_ms, excluded.max_ms)`),
    audit_trail: db.prepare(`INSERT INTO audit_rollup (level, block, kind, n, min_ms, max_ms) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (level, block, kind) DO UPDATE SET n = n + excluded.n, min_ms = min(min_ms, excluded.min_ms), max_ms = max(max_ms, excluded.max_ms)`),
  }

  const latestRecord = { events: db.prepare('SELECT max(id) FROM events').pluck(), audit_trail: db.prepare('SELECT max(id) FROM audit_trail').pluck() }
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const eventBatch = db
    .prepare<[number, number], unknown[]>(
      `SELECT id, created_ms, event_code, severity, category, peripheral_icon, description, hashtags, entity_id, asset_key, asset_name,
       peripheral_asset_id, details FROM events NOT INDEXED WHERE id > ? ORDER BY id LIMIT ?`,
    )
    .raw()
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const auditBatch = db.prepare<[number, number], unknown[]>(`SELECT id, created_ms, ${kindColumns.audit_trail.join(', ')} FROM audit_trail NOT INDEXED WHERE id > ? ORDER BY id LIMIT ?`).raw()

  /** Starts over after indexed records changed: counts are zeroed; the dictionaries stay valid. */
  function reset(table: RecordTable) {
    db.exec(`DELETE FROM ${rollupTable[table]}`)
    if (table === 'events') {
      db.exec('DELETE FROM event_time_spans; DELETE FROM event_source_ids; DELETE FROM event_kind_ids; UPDATE event_sources SET n = 0 WHERE n <> 0; UPDATE event_docs SET n = 0 WHERE n <> 0')
      docIds.reset()
    }
    setIndexed.run(0, table)
  }

  let pending: Delta | null = null

  /** Indexes up to `max` more records of `table`, in one transaction; answers how many. */
  const step = (table: RecordTable, max: number): number => {
    pending = null
    // Nothing new (the usual case between bursts): no write transaction at all.
    const s0 = state.get(table)!
    if (!s0.stale && ((latestRecord[table].get() as number | null) ?? 0) <= s0.indexed) return 0
    // Only a transaction of its own: inside another one the setting would be the other's.
    const unsynced = !opts.syncedSteps && !db.inTransaction && db.pragma('synchronous', { simple: true }) === SYNCHRONOUS_FULL
    if (unsynced) db.pragma('synchronous = NORMAL')
    try {
      return stepIn(table, max)
    } finally {
      if (unsynced) db.pragma('synchronous = FULL')
    }
  }
  const stepIn = (table: RecordTable, max: number): number => {
    const n = db
      .transaction(() => {
        // Read inside the write transaction: two indexers (say, the server and a script)
        // take turns and never count a record twice.
        let s = state.get(table)!
        const delta: Delta = { from: s.indexed, to: s.indexed, cells: new Map(), docs: new Map(), sources: new Map(), newDocs: [], newSources: [], fine: new Map(), reset: false }
        if (s.stale) {
          reset(table)
          ix.restarts++
          s = { indexed: 0, stale: 0, prunes: s.prunes }
          delta.reset = true
          delta.from = 0
        }
        pending = delta
        const rows = (table === 'events' ? eventBatch : auditBatch).all(s.indexed, max)
        if (!rows.length) return 0
        const rollup = delta.cells
        if (table === 'events') {
          const sourceN = delta.sources
          const docN = delta.docs
          const fine = delta.fine
          // (block, source, id) and (block, kind, id) of each event, inserted in key order: one
          // pass over the pages they land on.
          const bySource = new Float64Array(rows.length * 3)
          const byKind = new Float64Array(rows.length * 3)
          const ids = new Float64Array(rows.length)
          const docsOf = new Int32Array(rows.length)
          let at = 0
          let i = 0
          for (const r of rows) {
            const [id, ms, code, severity, category, icon, description, hashtags, entity, assetKey, assetName, device, details] = r as [
              number,
              number,
              string,
              number,
              string,
              number,
              string,
              string | null,
              string,
              string | null,
              string | null,
              string | null,
              string,
            ]
            const kind = kindId('events', [code, severity, category, icon, description, hashtags])
            addRollup(rollup, id, kind, ms)
            const sub = Math.floor(id / 2 ** FINE_SHIFT)
            const span = fine.get(sub)
            if (!span) fine.set(sub, [ms, ms])
            else if (ms < span[0]) span[0] = ms
            else if (ms > span[1]) span[1] = ms
            const source = sourceId(entity, assetKey, assetName, delta)
            const doc = docId(kind, source, device, details, delta)
            sourceN.set(source, (sourceN.get(source) ?? 0) + 1)
            docN.set(doc, (docN.get(doc) ?? 0) + 1)
            ids[i] = id
            docsOf[i++] = doc
            byKind[at] = Math.floor(id / 2 ** LEVEL_SHIFT[1])
            bySource[at++] = Math.floor(id / 2 ** SOURCE_BLOCK_SHIFT)
            byKind[at] = kind
            bySource[at++] = source
            byKind[at] = id
            bySource[at++] = id
          }
          for (const [table, insert] of [
            [bySource, insertSourceId],
            [byKind, insertKindId],
          ] as const) {
            const order = Array.from({ length: rows.length }, (_, i) => i * 3)
            order.sort((a, b) => table[a] - table[b] || table[a + 1] - table[b + 1] || table[a + 2] - table[b + 2])
            for (const i of order) insert.run(table[i], table[i + 1], table[i + 2])
          }
          for (const [sub, [min, max]] of fine) fineUpsert.run(sub, min, max)
          for (const [id, n] of sourceN) addSourceN.run(n, id)
          for (const [id, n] of docN) addDocN.run(n, id)
          docIds.append(ids, docsOf, rows.length)
        } else {
          for (const r of rows) {
            const [id, ms, ...values] = r as [number, number, ...unknown[]]
            addRollup(rollup, id, kindId('audit_trail', values), ms)
          }
        }
        for (const cell of rollup.values()) rollupUpsert[table].run(...cell)
        delta.to = (rows[rows.length - 1] as number[])[0]
        setIndexed.run(delta.to, table)
        return rows.length
      })
      .immediate()
    apply(table, pending)
    pending = null
    return n
  }

  // plan: a range of rowids, newest first (no override: the planner has nothing else to use)
  const eventsBelow = db
    .prepare<[number, number], unknown[]>(
      `SELECT id, event_code, severity, category, peripheral_icon, description, hashtags, entity_id, asset_key, asset_name, peripheral_asset_id, details
       FROM events WHERE id < ? ORDER BY id DESC LIMIT ?`,
    )
    .raw()
  /**
   * Writes the documents of up to `max` events indexed before event_doc_ids existed (migration
   * 030), the newest first, in one transaction; answers how many. Nothing is counted again:
   * the counts have these events already.
   */
  const fillDocs = (max: number): number => {
    const s0 = state.get('events')!
    if (s0.stale || docIds.from() <= 1) return 0
    const unsynced = !opts.syncedSteps && !db.inTransaction && db.pragma('synchronous', { simple: true }) === SYNCHRONOUS_FULL
    if (unsynced) db.pragma('synchronous = NORMAL')
    try {
      return db
        .transaction(() => {
          const s = state.get('events')!
          const below = docIds.from()
          if (s.stale || below <= 1) return 0
          const rows = eventsBelow.all(below, max) as [number, string, number, string, number, string, string | null, string, string | null, string | null, string | null, string][]
          const ids = new Float64Array(rows.length)
          const docs = new Int32Array(rows.length)
          const scratch = { newSources: [] as [number, string | null][], newDocs: [] as [number, number, number][] }
          // Ascending, as stretches are written.
          for (let i = rows.length - 1, at = 0; i >= 0; i--, at++) {
            const [id, code, severity, category, icon, description, hashtags, entity, assetKey, assetName, device, details] = rows[i]
            const kind = kindId('events', [code, severity, category, icon, description, hashtags])
            ids[at] = id
            docs[at] = docId(kind, sourceId(entity, assetKey, assetName, scratch), device, details, scratch)
          }
          docIds.prepend(ids, docs, rows.length, rows.length < max)
          return rows.length
        })
        .immediate()
    } finally {
      if (unsynced) db.pragma('synchronous = FULL')
    }
  }
  /**
   * Indexes everything written so far (tests, scripts), and writes the documents of the
   * events indexed before event_doc_ids existed; answers how many records it indexed.
   */
  function catchUp(table: RecordTable, batch = 4096): number {
    let total = 0
    for (let n = step(table, batch); n > 0; n = step(table, batch)) total += n
    if (table === 'events') while (fillDocs(batch) > 0);
    return total
  }

  return { step, fillDocs, catchUp }
}
