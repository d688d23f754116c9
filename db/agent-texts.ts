// "Contains" on host names and on the agent fields that few distinct values fill, in memory.
//
// Each field is a dictionary of its distinct values, lower-cased: a model is one value for
// 12,000 agents, a host name one for one agent. A term is matched against the values -
// through trigram lists of the values when a field has many, as host names - and the agents
// holding a matching value are the answer. At 100,000 agents "fin-lt" in host names takes
// about 0.16 ms here against 1-2 ms through the trigram index, "Latitude 5440" in every
// field under 0.1 ms against 5-8 ms.
//
// The dictionaries follow the table through agent_text_changes (migration 019): triggers
// note every agent inserted, deleted or whose fields here changed, whoever wrote it. Before
// each search the notes since the last one are applied (the agents' rows are read again);
// applied notes are pruned (prune()). A reader that finds notes pruned before it read them,
// or too many to apply one by one, builds again from the table. In the server, catchUp()
// applies the notes between requests (lib/search-upkeep.ts), so that a search seldom has
// many to apply, and builds worn dictionaries again there, a chunk of rows at a time, while
// the worn ones still serve.
import type { DB } from './index.js'

/** The fields searched here; host names first (they are read apart from the others). */
export const TEXT_FIELDS = ['host_identifier', 'os_version', 'pc_model', 'service_version', 'license_account_name', 'latest_event_text', 'hashtags'] as const
export type TextField = (typeof TEXT_FIELDS)[number]

/** A set of agent ids: one byte per id up to the largest (100 KB at 100,000 agents). */
export interface AgentSet {
  bits: Uint8Array
  n: number
}

export function emptySet(size: number): AgentSet {
  return { bits: new Uint8Array(size), n: 0 }
}

/** Adds ids to a set; the set grows when one is beyond it. */
export function addIds(set: AgentSet, ids: Iterable<number>): AgentSet {
  for (const id of ids) {
    if (id >= set.bits.length) {
      const bits = new Uint8Array(Math.max(id + 1, set.bits.length * 2))
      bits.set(set.bits)
      set.bits = bits
    }
    if (!set.bits[id]) {
      set.bits[id] = 1
      set.n++
    }
  }
  return set
}

/** The ids in both sets. */
export function intersect(a: AgentSet, b: AgentSet): AgentSet {
  const out = emptySet(Math.min(a.bits.length, b.bits.length))
  for (let id = 0; id < out.bits.length; id++) {
    if (a.bits[id] && b.bits[id]) {
      out.bits[id] = 1
      out.n++
    }
  }
  return out
}

/** The ids of a set, ascending. */
export function idsOf(set: AgentSet): number[] {
  const ids: number[] = []
  for (let id = 0; id < set.bits.length && ids.length < set.n; id++) if (set.bits[id]) ids.push(id)
  return ids
}

/**
 * The trigram at i as a small integer: 10 bits of each of its three UTF-16 units, exact
 * for characters below U+0400 (Latin, Greek) and shared by a few others beyond. A shared
 * key only adds candidates, and every candidate is tested for the term itself; a number
 * is found in a map several times faster than a three-character string, and is no string
 * to allocate.
 */
const trigramKey = (s: string, i: number) => ((s.charCodeAt(i) & 0x3ff) << 20) | ((s.charCodeAt(i + 1) & 0x3ff) << 10) | (s.charCodeAt(i + 2) & 0x3ff)

/** Values a step of indexing() goes through (a few milliseconds of host names). */
const STEP_VALUES = 8192

/** Distinct values above which a field's values get trigram lists (below, testing each is as quick). */
const TRIGRAMS_FROM = 1024

/** One field: its values, which agent holds which, and the agents of each value. */
class Field {
  /** Distinct values, lower-cased, by value number. */
  values: string[] = []
  numbers = new Map<string, number>()
  /**
   * Agents holding each value: the first in `firstOf` (most host names have one agent, and
   * a typed array is read twice as fast as a list per value), the others in `othersOf`.
   * An agent that moved to another value since stays listed (see `valueIndex`).
   */
  firstOf = new Int32Array(0)
  othersOf: (number[] | undefined)[] = []
  /** Agents holding each value now. */
  live: number[] = []
  /** Agent id -> value number (-1: none). */
  valueIndex = new Int32Array(0).fill(-1)
  /**
   * Trigram key -> the values holding it, ascending (when there are many values): the
   * values numbered when the lists were made lie in one typed array (`slots` gives a key's
   * place, its values are `indexed[starts[slot]]` to `indexed[starts[slot + 1]]`), those
   * numbered since in `added`. At 100,000 host names that is 1.4 million entries in 5.5 MB,
   * where a list per key took 16 MB of heap and left as much garbage as it grew.
   */
  trigrams: Map<number, number> | null = null
  starts = new Int32Array(1)
  indexed = new Int32Array(0)
  added = new Map<number, number[]>()
  /** Reading every row (build): the trigram lists are made once, at the end (index()). */
  bulk = false
  listed = 0
  agents = 0
  liveValues = 0

  set(id: number, text: string | null) {
    if (id >= this.valueIndex.length) {
      const grown = new Int32Array(Math.max(id + 1, this.valueIndex.length * 2, 1024)).fill(-1)
      grown.set(this.valueIndex)
      this.valueIndex = grown
    }
    const before = this.valueIndex[id]
    const after = text === null ? -1 : this.number(text.toLowerCase())
    if (before === after) return
    if (before >= 0) {
      this.agents--
      if (--this.live[before] === 0) this.liveValues--
    }
    this.valueIndex[id] = after
    if (after >= 0) {
      this.agents++
      if (this.live[after]++ === 0) this.liveValues++
      const first = this.firstOf[after]
      if (first === -1 || (first !== id && this.valueIndex[first] !== after)) {
        // Empty, or its first agent moved away: this one takes the place.
        this.firstOf[after] = id
        if (first === -1) this.listed++
      } else if (first !== id) {
        const others = (this.othersOf[after] ??= [])
        if (others[others.length - 1] !== id) {
          others.push(id)
          this.listed++
        }
      }
    }
  }

  private number(value: string): number {
    let n = this.numbers.get(value)
    if (n !== undefined) return n
    n = this.values.length
    this.values.push(value)
    this.numbers.set(value, n)
    if (n >= this.firstOf.length) {
      const grown = new Int32Array(Math.max(1024, this.firstOf.length * 2)).fill(-1)
      grown.set(this.firstOf)
      this.firstOf = grown
    }
    this.live.push(0)
    if (this.trigrams) this.addTrigrams(n)
    else if (!this.bulk) this.index()
    return n
  }

  /** Makes the trigram lists of every value now, if there are enough values to want them. */
  index() {
    for (const _ of this.indexing());
  }

  /** index() in steps: it yields every `every` values (a rebuild between requests). */
  *indexing(every = STEP_VALUES): Generator<void, void> {
    this.bulk = false
    const { values } = this
    if (values.length <= TRIGRAMS_FROM) return
    // Twice through the values: how many each key holds, then the values in place.
    const slots = new Map<number, number>()
    const counts: number[] = []
    const eachKey = (v: number, of: (slot: number) => void) => {
      const s = values[v]
      for (let i = 0; i + 3 <= s.length; i++) {
        const t = trigramKey(s, i)
        let slot = slots.get(t)
        if (slot === undefined) {
          slot = counts.length
          slots.set(t, slot)
          counts.push(0)
        }
        of(slot)
      }
    }
    // A key twice in one value counts once: `last` is the last value each slot counted.
    let last: number[] = []
    for (let v = 0; v < values.length; v++) {
      eachKey(v, (slot) => {
        if (last[slot] !== v + 1) {
          last[slot] = v + 1
          counts[slot]++
        }
      })
      if (v % every === every - 1) yield
    }
    const starts = new Int32Array(counts.length + 1)
    for (let slot = 0; slot < counts.length; slot++) starts[slot + 1] = starts[slot] + counts[slot]
    const indexed = new Int32Array(starts[counts.length])
    const fill = starts.slice(0, counts.length)
    last = []
    for (let v = 0; v < values.length; v++) {
      eachKey(v, (slot) => {
        if (last[slot] !== v + 1) {
          last[slot] = v + 1
          indexed[fill[slot]++] = v
        }
      })
      if (v % every === every - 1) yield
    }
    this.trigrams = slots
    this.starts = starts
    this.indexed = indexed
    this.added = new Map()
  }

  private addTrigrams(v: number) {
    const s = this.values[v]
    for (let i = 0; i + 3 <= s.length; i++) {
      const t = trigramKey(s, i)
      const list = this.added.get(t)
      if (!list) this.added.set(t, [v])
      else if (list[list.length - 1] !== v) list.push(v)
    }
  }

  /** Values (held by some agent) that contain the lower-cased term. */
  matching(term: string): number[] {
    const out: number[] = []
    const { live, values } = this
    if (this.trigrams && term.length >= 3) {
      // Every trigram of the term is in a matching value: the shortest list bounds them.
      const { trigrams, starts, indexed, added } = this
      let from = 0
      let to = -1
      let more: number[] | undefined
      for (let i = 0; i + 3 <= term.length; i++) {
        const t = trigramKey(term, i)
        const slot = trigrams.get(t)
        const a = slot === undefined ? 0 : starts[slot]
        const b = slot === undefined ? 0 : starts[slot + 1]
        const extra = added.get(t)
        const n = b - a + (extra ? extra.length : 0)
        if (n === 0) return []
        if (to < 0 || n < to - from + (more ? more.length : 0)) {
          from = a
          to = b
          more = extra
        }
      }
      // The indexed values, then those numbered since (all higher): ascending.
      for (let i = from; i < to; i++) {
        const v = indexed[i]
        if (live[v] > 0 && values[v].includes(term)) out.push(v)
      }
      if (more) {
        for (let i = 0; i < more.length; i++) {
          const v = more[i]
          if (live[v] > 0 && values[v].includes(term)) out.push(v)
        }
      }
    } else {
      for (let v = 0; v < values.length; v++) if (live[v] > 0 && values[v].includes(term)) out.push(v)
    }
    return out
  }

  /** Adds the agents holding a value that contains the lower-cased term. */
  collect(term: string, into: AgentSet) {
    const matched = this.matching(term)
    const { firstOf, othersOf, valueIndex } = this
    const add = (id: number, v: number) => {
      if (valueIndex[id] !== v) return
      if (id >= into.bits.length) addIds(into, [id])
      else if (into.bits[id] === 0) {
        into.bits[id] = 1
        into.n++
      }
    }
    for (let m = 0; m < matched.length; m++) {
      const v = matched[m]
      add(firstOf[v], v)
      const others = othersOf[v]
      if (others) for (let i = 0; i < others.length; i++) add(others[i], v)
    }
  }

  /** Whether lists of moved agents or values no agent holds outweigh what is live. */
  get worn(): boolean {
    return this.listed > 2 * this.agents + 4096 || this.values.length > 2 * this.liveValues + 4096
  }
}

/** Notes applied in one step of catchUp (about 4 ms at 100,000 agents). */
const CATCH_UP_NOTES = 256
/** Rows read in one step of a rebuild in steps. */
const BUILD_ROWS = 2000

/** `steps`: the rows and values of a rebuild's step (smaller in tests, to see the steps). */
export function agentTexts(db: DB, steps: { rows: number; values: number } = { rows: BUILD_ROWS, values: STEP_VALUES }) {
  const columns = TEXT_FIELDS.join(', ')
  const lastNote = db.prepare<[], number>("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'agent_text_changes'), 0)").pluck()
  const notesAfter = db.prepare<[number, number], [number, number]>('SELECT seq, agent_id FROM agent_text_changes WHERE seq > ? ORDER BY seq LIMIT ?').raw()
  // Read in two passes: host names (a value per agent) apart from the fields of few values,
  // so that the host names' values and lists lie together in memory, which halves the time
  // of a search through thousands of them; and no copy of every row is held.
  const everyHost = db.prepare('SELECT id, host_identifier FROM agents').raw()
  const everyOther = db.prepare(`SELECT id, ${TEXT_FIELDS.slice(1).join(', ')} FROM agents`).raw()
  const someAgents = db.prepare<[string]>(`SELECT id, ${columns} FROM agents WHERE id IN (SELECT value FROM json_each(?))`).raw()
  const agentCount = db.prepare<[], number>("SELECT n FROM row_counts WHERE name = 'agents'").pluck()
  const prune = db.prepare<[number]>('DELETE FROM agent_text_changes WHERE seq <= ?')
  // A rebuild between requests reads the rows a chunk at a time, in id order.
  const hostsAfter = db.prepare<[number, number]>('SELECT id, host_identifier FROM agents WHERE id > ? ORDER BY id LIMIT ?').raw()
  const othersAfter = db.prepare<[number, number]>(`SELECT id, ${TEXT_FIELDS.slice(1).join(', ')} FROM agents WHERE id > ? ORDER BY id LIMIT ?`).raw()

  let fields: Field[] | null = null
  /** The last note applied. */
  let applied = 0
  let size = 0
  /** Whether catchUp runs between requests: worn dictionaries are then built again there, in steps. */
  let stepping = false
  /** A rebuild in steps under way (catchUp advances it), and the last note before its first read. */
  let rebuilding: { steps: Generator<void, void>; from: number } | null = null

  function build(): Field[] {
    rebuilding = null
    const all = TEXT_FIELDS.map(() => new Field())
    for (const f of all) f.bulk = true
    // One read: the rows and the last note agree.
    db.transaction(() => {
      applied = lastNote.get() as number
      size = 0
      for (const [id, host] of everyHost.iterate() as IterableIterator<[number, string]>) {
        if (id >= size) size = id + 1
        all[0].set(id, host)
      }
      const others = all.slice(1)
      for (const row of everyOther.iterate() as IterableIterator<unknown[]>) {
        for (let f = 0; f < others.length; f++) others[f].set(row[0] as number, row[f + 1] as string | null)
      }
    })()
    for (const f of all) f.index()
    fields = all
    return all
  }

  /**
   * build() in steps of `steps.rows` rows (a few milliseconds each), for catchUp to run between
   * requests while the dictionaries it replaces still serve. The rows are read over many
   * turns, each chunk as it is then; every agent changed since the first read has a note
   * after `from`, which the new dictionaries apply once they serve.
   */
  function* buildInSteps(from: number): Generator<void, void> {
    const all = TEXT_FIELDS.map(() => new Field())
    for (const f of all) f.bulk = true
    let largest = 0
    for (let after = 0; ; yield) {
      const rows = hostsAfter.all(after, steps.rows) as [number, string][]
      for (const [id, host] of rows) all[0].set(id, host)
      if (rows.length < steps.rows) break
      after = rows[rows.length - 1][0]
    }
    const others = all.slice(1)
    for (let after = 0; ; yield) {
      const rows = othersAfter.all(after, steps.rows) as unknown[][]
      for (const row of rows) {
        const id = row[0] as number
        if (id > largest) largest = id
        for (let f = 0; f < others.length; f++) others[f].set(id, row[f + 1] as string | null)
      }
      if (rows.length < steps.rows) break
      after = rows[rows.length - 1][0] as number
    }
    for (const f of all) yield* f.indexing(steps.values)
    fields = all
    applied = from
    size = largest + 1
  }

  /**
   * Applies up to `limit` notes (all of them without a limit); answers whether none is left.
   * Builds again instead when notes were pruned before they were read here, when the table
   * was emptied, when the dictionaries are worn, or (with no limit) when there are more
   * notes than reading every row costs.
   */
  function apply(limit = Number.POSITIVE_INFINITY): boolean {
    if (!fields) {
      build()
      return true
    }
    const last = lastNote.get() as number
    if (last === applied) return true
    // Many notes (a bulk load, the whole fleet disconnected): reading every row is quicker
    // (a note costs about 15 us, reading every row about 9 us an agent).
    if (last < applied || (limit === Number.POSITIVE_INFINITY && last - applied > Math.max(1000, (agentCount.get() as number) / 2))) {
      build()
      return true
    }
    const take = Math.min(last - applied, limit)
    const notes = notesAfter.all(applied, take) as [number, number][]
    // Numbers are never used twice, so a missing one was pruned before it was read here.
    if (notes.length !== take || notes[0][0] !== applied + 1) {
      build()
      return true
    }
    const ids = [...new Set(notes.map((n) => n[1]))]
    const seen = new Set<number>()
    for (const row of someAgents.all(JSON.stringify(ids)) as unknown[][]) {
      const id = row[0] as number
      if (id >= size) size = id + 1
      for (let f = 0; f < fields.length; f++) fields[f].set(id, row[f + 1] as string | null)
      seen.add(id)
    }
    // Gone: deleted.
    for (const id of ids) if (!seen.has(id)) for (const f of fields) if (id < f.valueIndex.length) f.set(id, null)
    applied = notes[notes.length - 1][0]
    if (fields.some((f) => f.worn)) {
      if (!stepping) {
        build()
        return true
      }
      // Between requests, in catchUp's steps; meanwhile these serve, worn but whole.
      rebuilding ??= { steps: buildInSteps(last), from: last }
    }
    return applied === last
  }

  /** The dictionaries, with every note applied. */
  function current(): Field[] {
    // Inside a transaction the notes may yet be rolled back: what was applied before serves.
    if (fields && db.inTransaction) return fields
    apply()
    return fields!
  }

  const texts = {
    /** The agents whose field contains the term, case-insensitively (any length of term). */
    search: (field: TextField, term: string): AgentSet => texts.searchAny([field], term),

    /** The agents of which any of the fields contains the term. */
    searchAny(fieldNames: readonly TextField[], term: string): AgentSet {
      const all = current()
      const set = emptySet(size)
      const lower = term.toLowerCase()
      for (const name of fieldNames) all[TEXT_FIELDS.indexOf(name)].collect(lower, set)
      return set
    },

    /** Deletes the notes applied here (the server calls it now and then); answers how many. */
    prune(): number {
      if (db.inTransaction) return 0
      // Not built yet: the first search reads the table, so no note is of use here. A rebuild
      // under way applies the notes after its first read once it serves.
      const upTo = !fields ? (lastNote.get() as number) : rebuilding ? Math.min(applied, rebuilding.from) : applied
      return prune.run(upTo).changes
    },

    /**
     * Applies the notes written since the last search, CATCH_UP_NOTES at a time, for about
     * `budgetMs` (at least one step); answers whether notes are left. Run between requests
     * (agentSearchLoop), it keeps what a search must apply first small: a minute of check-ins
     * that each changed an agent's latest event text is tens of thousands of notes, and a
     * search that found them all would apply them, or build again, in one go (0.8 s at
     * 100,000 agents).
     */
    catchUp(budgetMs: number): boolean {
      if (!fields || db.inTransaction) return false
      stepping = true
      const until = performance.now() + budgetMs
      // Worn dictionaries are built again here, a step at a time (a whole rebuild in one go
      // is 0.8 s at 100,000 agents); a build() meanwhile (notes pruned unread) ends it.
      if (rebuilding) {
        do if (rebuilding.steps.next().done) rebuilding = null
        while (rebuilding && performance.now() < until)
        if (rebuilding) return true
      }
      let done: boolean
      do done = apply(CATCH_UP_NOTES)
      while (!done && performance.now() < until)
      return !done || rebuilding !== null
    },

    /** Whether worn dictionaries are being built again in catchUp's steps. */
    get rebuilding(): boolean {
      return rebuilding !== null
    },

    /** Builds the dictionaries now if they are not (half a second at 100,000 agents): the server does it before it listens. */
    warm(): number {
      const t = performance.now()
      if (!fields) build()
      return performance.now() - t
    },
  }
  return texts
}
export type AgentTexts = ReturnType<typeof agentTexts>
