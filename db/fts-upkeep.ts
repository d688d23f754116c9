// The upkeep of the trigram indexes whose rows change (agents, peripherals, risk
// notifications). FTS5 writes every change to a new segment and leaves the entries it
// replaces in the old ones until segments are merged; its automerge keeps the number of
// segments bounded, not what they hold. After a mass disconnect (every agent's search
// text rewritten), the agents' index held twice the pages it needs and a search over
// 100,000 agents took up to three times as long (5 -> 17 ms). Merged back into one
// segment, the index answers as it did when built.
import type { DB } from './index.js'

/** The trigram indexes of tables whose rows are updated or deleted. */
export const UPKEPT_INDEXES = ['agents_fts', 'peripherals_fts', 'risk_notifications_fts'] as const
export type UpkeptIndex = (typeof UPKEPT_INDEXES)[number]

/** Below this many leaf pages (about 256 KB) an index is left as it is. */
const MIN_PAGES = 64

export function ftsUpkeep(db: DB) {
  const segments = new Map(UPKEPT_INDEXES.map((name) => [name, db.prepare<[], number>(`SELECT count(*) FROM "${name}_idx" GROUP BY segid`).pluck()]))
  const merges = new Map(UPKEPT_INDEXES.map((name) => [name, db.prepare<[number]>(`INSERT INTO "${name}" ("${name}", rank) VALUES ('merge', ?)`)]))
  // A literal: FTS5 takes the setting only as an INTEGER, and a bound number is a REAL.
  const twoWay = new Map(UPKEPT_INDEXES.map((name) => [name, db.prepare(`INSERT INTO "${name}" ("${name}", rank) VALUES ('usermerge', 2)`)]))
  const totalChanges = db.prepare<[], number>('SELECT total_changes()').pluck()

  return {
    /**
     * The index's segments by size (leaf pages, from its %_idx table: one entry a page),
     * and whether merging them is due: the segments besides the largest hold more than a
     * quarter of its pages (what a rewrite of a quarter of the rows leaves behind).
     */
    measure(name: UpkeptIndex): { segments: number; pages: number; due: boolean } {
      const sizes = segments.get(name)!.all()
      const pages = sizes.reduce((a, b) => a + b, 0)
      const largest = Math.max(0, ...sizes)
      return { segments: sizes.length, pages, due: sizes.length > 1 && pages >= MIN_PAGES && pages - largest > largest / 4 }
    },

    /**
     * One step of merging every segment into one, writing about `pages` pages. False once
     * there was nothing left to merge (FTS5 then changes fewer than two rows).
     *
     * The first step (`begin`) is FTS5's 'merge' with a negative budget: every segment,
     * of any level, becomes an input of one merge. The steps after it are positive merges,
     * which carry that merge on. A negative merge must not be repeated while writes go on:
     * each one that finds a segment written since the last starts the merge again, on a
     * new level, with every segment as its input; under steady writes it never finishes,
     * every write leaves one more segment behind, and at 2,000 segments (FTS5_MAX_SEGMENT)
     * every write to the table fails with SQLITE_FULL. A positive merge works on the level
     * whose merge is under way, or on a level of at least 'usermerge' segments (set to 2,
     * its least, so that the segments written meanwhile are merged as well and the big
     * merge is not held back by them).
     */
    mergeStep(name: UpkeptIndex, pages: number, begin: boolean): boolean {
      if (begin) twoWay.get(name)!.run()
      const before = totalChanges.get() as number
      merges.get(name)!.run(begin ? -pages : pages)
      return (totalChanges.get() as number) - before >= 2
    },
  }
}
export type FtsUpkeep = ReturnType<typeof ftsUpkeep>
