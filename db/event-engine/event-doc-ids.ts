// The document of each indexed event (event_doc_ids, migration 030), by stretch of ids: the
// indexer appends a stretch with each batch (and fills in those indexed before the table
// existed, newest first), the retention job clears the events it deletes, and text filters
// over a range of ids read them to tell the matches from the documents that match.
import { cacheIn, type CacheRegistry } from '../../lib/platform/cache.js'
import type { DB } from '../index.js'

/** A stretch shorter than this is extended by the next batch rather than followed by another (a busy server indexes 64 events at a time). */
const MIN_STRETCH = 1024
/** A gap of more ids than this between two events starts a new stretch (ids are dense; a stretch never holds much air). */
const MAX_GAP = 64

/**
 * Bytes of stretches' ids kept in memory (4 bytes an id: 8M ids), least recently used first out: text
 * questions over random days walk stretches all over the table, and reading one again (a
 * bulk-indexed stretch holds 65,536 ids) cost ten times the walk of the block it was read
 * for, and its garbage a collection every half second.
 */
const KEPT_BYTES = 32 * 1024 * 1024

/** The ids of a stretch as a view (no copy when the blob is aligned, as it nearly always is). */
export function idsOf(blob: Buffer): Int32Array {
  if (blob.byteOffset % 4 === 0) return new Int32Array(blob.buffer, blob.byteOffset, blob.length >> 2)
  const copy = new Int32Array(blob.length >> 2)
  new Uint8Array(copy.buffer).set(blob)
  return copy
}
const blobOf = (docs: Int32Array) => Buffer.from(docs.buffer, docs.byteOffset, docs.byteLength)

/** Little-endian (the machines SQLite databases of this server are written on). */
if (new Uint8Array(new Int32Array([1]).buffer)[0] !== 1) throw new Error('event_doc_ids are stored little-endian')

export function eventDocIds(db: DB, caches?: CacheRegistry) {
  const state = db.prepare<[], { indexed: number; stale: number; docs_from: number }>("SELECT indexed, stale, docs_from FROM record_index_state WHERE name = 'events'")
  const setFrom = db.prepare<[number]>("UPDATE record_index_state SET docs_from = ? WHERE name = 'events'")
  const last = db.prepare<[], { hi: number; lo: number; docs: Buffer }>('SELECT hi, lo, docs FROM event_doc_ids ORDER BY hi DESC LIMIT 1')
  const insert = db.prepare<[number, number, Buffer]>('INSERT INTO event_doc_ids (hi, lo, docs) VALUES (?, ?, ?)')
  const removeRow = db.prepare<[number]>('DELETE FROM event_doc_ids WHERE hi = ?')
  const remove = {
    run(hi: number) {
      kept.delete(hi)
      removeRow.run(hi)
    },
  }
  const holding = db.prepare<[number], { hi: number; lo: number; docs: Buffer }>('SELECT hi, lo, docs FROM event_doc_ids WHERE hi >= ? ORDER BY hi LIMIT 1')
  // The walks read the stretches' bounds, and their ids only when not kept (a stretch is
  // rewritten whole, so one with the same bounds holds the same ids unless cleared here or
  // by another process: forget()).
  const holdingSpan = db.prepare<[number], { hi: number; lo: number }>('SELECT hi, lo FROM event_doc_ids WHERE hi >= ? ORDER BY hi LIMIT 1')
  const fromSpans = db.prepare<[number], { hi: number; lo: number }>('SELECT hi, lo FROM event_doc_ids WHERE hi >= ? ORDER BY hi')
  const fromDownSpans = db.prepare<[number], { hi: number; lo: number }>('SELECT hi, lo FROM event_doc_ids WHERE hi <= ? ORDER BY hi DESC')
  const docsAt = db.prepare<[number], Buffer>('SELECT docs FROM event_doc_ids WHERE hi = ?').pluck()
  const kept = cacheIn<number, { lo: number; docs: Int32Array }>(caches, {
    name: 'event-doc-stretches',
    signal: 'a stretch rewritten or cleared (retention), the index starting over, the summary read again (another process)',
    maxBytes: KEPT_BYTES,
    sizeOf: (k) => k.docs.byteLength + 32,
  })
  const docsOf = (s: { hi: number; lo: number }): Int32Array => {
    const k = kept.get(s.hi)
    if (k && k.lo === s.lo) return k.docs
    // A view of the blob read (a buffer of its own), not a copy of it.
    const docs = idsOf(docsAt.get(s.hi)!)
    kept.set(s.hi, { lo: s.lo, docs })
    return docs
  }

  /** Writes (id, doc) pairs in ascending id order as stretches, none of them air-filled. */
  function write(ids: ArrayLike<number>, docs: ArrayLike<number>, count: number, extendLast: boolean) {
    let start = 0
    // The newest stretch, while short, takes the first ids of this batch (written again whole).
    let prev: { hi: number; lo: number; docs: Int32Array } | null = null
    if (extendLast && count > 0) {
      const l = last.get()
      if (l && l.hi - l.lo + 1 < MIN_STRETCH && ids[0] > l.hi && ids[0] - l.hi <= MAX_GAP) prev = { hi: l.hi, lo: l.lo, docs: idsOf(l.docs) }
    }
    while (start < count) {
      let end = start + 1
      while (end < count && ids[end] - ids[end - 1] <= MAX_GAP) end++
      const lo = prev ? prev.lo : ids[start]
      const hi = ids[end - 1]
      const out = new Int32Array(hi - lo + 1)
      if (prev) {
        out.set(prev.docs)
        remove.run(prev.hi)
        prev = null
      }
      for (let i = start; i < end; i++) out[ids[i] - lo] = docs[i]
      insert.run(hi, lo, blobOf(out))
      start = end
    }
  }

  return {
    /** The lowest id from which every indexed event has its document here. */
    from: (): number => {
      const s = state.get()!
      return s.stale ? 1 : s.docs_from
    },
    /** The documents of a batch just indexed (ascending ids, above every stretch). */
    append(ids: ArrayLike<number>, docs: ArrayLike<number>, count: number) {
      write(ids, docs, count, true)
    },
    /**
     * The documents of events indexed before this table existed, below `docs_from`: `ids`
     * and `docs` ascending, the newest `count` events below it; `bottom` when none is left
     * below them. Moves `docs_from` down.
     */
    prepend(ids: ArrayLike<number>, docs: ArrayLike<number>, count: number, bottom: boolean) {
      const s = state.get()!
      if (count > 0 && ids[count - 1] >= s.docs_from) throw new Error(`event ${ids[count - 1]} has its document already (from ${s.docs_from})`)
      write(ids, docs, count, false)
      setFrom.run(bottom || count === 0 ? 1 : ids[0])
    },
    /** Nothing is indexed any more (the index starts over). */
    reset() {
      kept.clear()
      db.exec('DELETE FROM event_doc_ids')
      setFrom.run(1)
    },
    /** Takes deleted events (ascending ids) out of their stretches. */
    clear(ids: readonly number[]) {
      const floor = state.get()!.docs_from
      let i = 0
      while (i < ids.length && ids[i] < floor) i++
      while (i < ids.length) {
        const s = holding.get(ids[i])
        if (!s) break
        const docs = new Int32Array(idsOf(s.docs))
        for (; i < ids.length && ids[i] <= s.hi; i++) if (ids[i] >= s.lo) docs[ids[i] - s.lo] = 0
        remove.run(s.hi)
        if (docs.some((d) => d !== 0)) insert.run(s.hi, s.lo, blobOf(docs))
      }
    },
    /**
     * Calls `visit(lo, docs)` with the stretches holding ids of [lo, hi], in ascending order
     * (`desc`: descending) until it answers false. `docs[i]` is the document of id lo + i.
     */
    each(lo: number, hi: number, visit: (lo: number, docs: Int32Array) => boolean | undefined, desc = false) {
      if (lo > hi) return
      if (desc) {
        // The stretch holding hi is the first with hi' >= hi; it and those below, newest first.
        const top = holdingSpan.get(hi)
        if (top && top.lo <= hi && visit(top.lo, docsOf(top)) === false) return
        for (const s of fromDownSpans.iterate(top ? top.lo - 1 : hi)) {
          if (s.hi < lo || visit(s.lo, docsOf(s)) === false) return
        }
        return
      }
      for (const s of fromSpans.iterate(lo)) {
        if (s.lo > hi || visit(s.lo, docsOf(s)) === false) return
      }
    },
    /** Forgets the stretches kept in memory (another process may have rewritten them). */
    forget() {
      kept.clear()
    },
  }
}
export type EventDocIds = ReturnType<typeof eventDocIds>
