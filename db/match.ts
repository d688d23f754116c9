// `like_any(text, id)`: whether a text matches any of a list of LIKE patterns (escaped with
// `\`; the list registered by patternList), as `text LIKE p1 ESCAPE '\' OR text LIKE p2 ESCAPE '\' OR ...` answers,
// in one call per row. An OR of LIKEs computes the text again for every pattern: a filter of
// fifty values on an asset's MAC (a subquery over the host's adapters) ran that subquery
// fifty times per row.
import type Database from 'better-sqlite3'

type Matcher = (text: string) => boolean

/** Lower-case ASCII letters only, as SQLite's LIKE compares (other letters match exactly). */
export const lowerAscii = (s: string): string => (/[^\x00-\x7f]/.test(s) ? s.replace(/[A-Z]+/g, (m) => m.toLowerCase()) : s.toLowerCase())

const ANY = Symbol('%')
const ONE = Symbol('_')

/** One LIKE pattern (ESCAPE '\\') as a regular expression over a text lowered with lowerAscii; `one`: it uses `_`. */
function likeSource(pattern: string): { source: string; one: boolean } {
  // Literal runs (escapes resolved, lowered) and wildcards.
  const parts: (string | typeof ANY | typeof ONE)[] = []
  let literal = ''
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '\\' && i + 1 < pattern.length) literal += pattern[++i]
    else if (c === '%' || c === '_') {
      if (literal) parts.push(lowerAscii(literal))
      literal = ''
      parts.push(c === '%' ? ANY : ONE)
    } else literal += c
  }
  if (literal) parts.push(lowerAscii(literal))
  // A leading or trailing `%` is an unanchored end.
  let from = 0
  let to = parts.length
  while (from < to && parts[from] === ANY) from++
  while (to > from && parts[to - 1] === ANY) to--
  const body = parts
    .slice(from, to)
    .map((p) => (p === ANY ? '.*' : p === ONE ? '.' : p.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')))
    .join('')
  return { source: `(?:${from === 0 ? '^' : ''}${body}${to === parts.length ? '$' : ''})`, one: parts.includes(ONE) }
}

/**
 * A list of LIKE patterns as one test of a text: one regular expression with an alternative
 * per pattern (about ten times as fast as testing the patterns one by one).
 */
export function likeMatcher(patterns: readonly string[]): Matcher {
  const all = patterns.map(likeSource)
  // `_` is one character, as in SQLite: a code point ('u'); `%` spans line breaks ('s').
  const re = new RegExp(all.map((p) => p.source).join('|'), all.some((p) => p.one) ? 'su' : 's')
  return (t) => re.test(t)
}

/**
 * Pattern lists by id: a statement binds the id (a number) rather than the list, so that a
 * row's call converts no text but its own. Ids are never reused; the lists of the last
 * KEPT distinct queries' filters are kept (a query holds at most 20 filters), which is
 * ample between rendering a statement and running it, done together without awaiting.
 */
const KEPT = 256
const lists = new Map<string, { id: number; matcher: Matcher }>()
const byId = new Map<number, Matcher>()
let nextId = 1

/** The id that stands for these patterns in `like_any(text, id)`. */
export function patternList(patterns: readonly string[]): number {
  const key = JSON.stringify(patterns)
  let entry = lists.get(key)
  if (entry) lists.delete(key)
  else {
    entry = { id: nextId++, matcher: likeMatcher(patterns) }
    byId.set(entry.id, entry.matcher)
    if (lists.size >= KEPT) {
      const [oldest, old] = lists.entries().next().value!
      lists.delete(oldest)
      byId.delete(old.id)
    }
  }
  lists.set(key, entry)
  return entry.id
}

/** 1 when `text` matches any of the list's patterns, 0 when none, NULL when text is NULL (as LIKE). */
export function likeAny(text: unknown, id: number): number | null {
  const matcher = byId.get(id)
  if (!matcher) throw new Error(`like_any: no pattern list ${id}`)
  if (text === null || text === undefined) return null
  return matcher(lowerAscii(String(text))) ? 1 : 0
}

export function registerMatchFunctions(db: Database.Database): void {
  db.function('like_any', { deterministic: true }, (text: unknown, id: unknown) => likeAny(text, Number(id)))
  registerEventContains(db)
}

/** `event_contains(text, term)`: Unicode case folding for the events' "contains" terms beyond ASCII (db/event-engine/event-plans.ts textMatch). */
export function registerEventContains(db: Database.Database): void {
  db.function('event_contains', { deterministic: true }, (text: unknown, term: unknown) => (typeof text === 'string' && typeof term === 'string' && text.toLowerCase().includes(term) ? 1 : 0))
}
