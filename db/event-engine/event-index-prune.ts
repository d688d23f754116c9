// The event index's side of a prune (db/event-engine/event-index.ts): the records deleted by the
// retention job are taken out of every count in the same transaction.
import { LEVEL_SHIFT, SOURCE_BLOCK_SHIFT, addRollup, kindColumns, type IndexerState, type PruneDelta } from './event-index-structures.js'
import type { RecordTable } from '../../lib/events/ports.js'
import type { IndexDictionaries } from './event-index-dictionaries.js'

/** The prunes of an indexer (the summary follows a committed one: applyPrune, db/event-engine/event-index-summary.ts). */
export function indexPrunes(ix: IndexerState, dicts: IndexDictionaries) {
  const { db, state, docIds } = ix
  const { kindId, sourceId, docId } = dicts
  // ---- pruning (the retention job, lib/retention/job.ts) ----
  // The records to delete come as a list of ids (json_each): the job picks them by time,
  // in whatever id order they were written.
  const pruneBatch = {
    events: db
      .prepare<[string], unknown[]>(
        `SELECT id, created_ms, event_code, severity, category, peripheral_icon, description, hashtags, entity_id, asset_key, asset_name,
         peripheral_asset_id, details FROM events WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id`,
      )
      .raw(),
    audit_trail: db.prepare<[string], unknown[]>(`SELECT id, created_ms, ${kindColumns.audit_trail.join(', ')} FROM audit_trail WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id`).raw(),
  }
  const rollupSub = {
    events: db.prepare('UPDATE event_rollup SET n = n - ? WHERE level = ? AND block = ? AND kind = ?'),
    audit_trail: db.prepare('UPDATE audit_rollup SET n = n - ? WHERE level = ? AND block = ? AND kind = ?'),
  }
  const rollupDrop = {
    events: db.prepare('DELETE FROM event_rollup WHERE level = ? AND block = ? AND kind = ? AND n <= 0'),
    audit_trail: db.prepare('DELETE FROM audit_rollup WHERE level = ? AND block = ? AND kind = ? AND n <= 0'),
  }
  const deleteSourceId = db.prepare<[number, number, number]>('DELETE FROM event_source_ids WHERE blk = ? AND source = ? AND id = ?')
  const deleteKindId = db.prepare<[number, number, number]>('DELETE FROM event_kind_ids WHERE blk = ? AND kind = ? AND id = ?')
  const subSourceN = db.prepare<[number, number]>('UPDATE event_sources SET n = n - ? WHERE id = ?')
  const subDocN = db.prepare<[number, number]>('UPDATE event_docs SET n = n - ? WHERE id = ?')
  const deleteRecords = {
    events: db.prepare<[string]>('DELETE FROM events WHERE id IN (SELECT value FROM json_each(?))'),
    audit_trail: db.prepare<[string]>('DELETE FROM audit_trail WHERE id IN (SELECT value FROM json_each(?))'),
  }
  const setPruned = db.prepare<[number, number, string]>('UPDATE record_index_state SET prunes = ?, pruned_through = max(pruned_through, ?) WHERE name = ?')

  /**
   * Deletes the records of `table` with the given ids (all indexed; ids no longer there
   * are passed over), inside the caller's transaction, taking them out of every count:
   * block counts, the events' ids by source and by kind, the documents' and sources'
   * counts. Documents and sources left at 0 stay (a later event may use them again). The
   * time spans of the counts stay as they were: still bounds of what is left, and a query
   * reads rows where a bound decides. Answers how many records were deleted.
   */
  function prune(table: RecordTable, ids: readonly number[]): { deleted: number; delta: PruneDelta } {
    const s = state.get(table)!
    if (s.stale) throw new Error(`the ${table} index is starting over: prune after it has caught up`)
    const delta: PruneDelta = { from: s.prunes, to: s.prunes, cells: new Map(), docs: new Map(), sources: new Map() }
    if (ids.length === 0) return { deleted: 0, delta }
    let top = 0
    for (const id of ids) if (id > top) top = id
    if (top > s.indexed) throw new Error(`${table} ${top} is not indexed yet (indexed up to ${s.indexed})`)
    const list = JSON.stringify(ids)
    const rows = pruneBatch[table].all(list)
    const cells = delta.cells
    const scratch = { newSources: [] as [number, string | null][], newDocs: [] as [number, number, number][] }
    if (table === 'events') {
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
        addRollup(cells, id, kind, ms)
        const source = sourceId(entity, assetKey, assetName, scratch)
        const doc = docId(kind, source, device, details, scratch)
        delta.sources.set(source, (delta.sources.get(source) ?? 0) + 1)
        delta.docs.set(doc, (delta.docs.get(doc) ?? 0) + 1)
        deleteSourceId.run(Math.floor(id / 2 ** SOURCE_BLOCK_SHIFT), source, id)
        deleteKindId.run(Math.floor(id / 2 ** LEVEL_SHIFT[1]), kind, id)
      }
      for (const [id, n] of delta.sources) subSourceN.run(n, id)
      for (const [id, n] of delta.docs) subDocN.run(n, id)
      docIds.clear(rows.map((r) => r[0] as number))
    } else {
      for (const r of rows) {
        const [id, ms, ...values] = r as [number, number, ...unknown[]]
        addRollup(cells, id, kindId('audit_trail', values), ms)
      }
    }
    for (const [level, block, kind, n] of cells.values()) {
      rollupSub[table].run(n, level, block, kind)
      rollupDrop[table].run(level, block, kind)
    }
    const deleted = deleteRecords[table].run(list).changes
    if (deleted !== rows.length) throw new Error(`${table}: ${rows.length} records counted out, ${deleted} deleted`)
    delta.to = s.prunes + 1
    setPruned.run(delta.to, top, table)
    return { deleted, delta }
  }

  return { prune }
}
