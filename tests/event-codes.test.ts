// backend: sqlite-only — the catalogue's event codes against SQLite's migrations (risk_notification_kinds)
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import t from 'tap'
import { migrate } from '../db/index.js'
import { eventCodes, type EventCode } from '../lib/event-codes.js'
import { projectRoot, specPath } from '../lib/paths.js'

const entries = Object.entries(eventCodes) as [string, EventCode][]
const byCode = new Map(entries.map(([name, e]) => [e.code, { name, ...e }]))
const CODE = /0x[0-9A-Fa-f]{6}\b/g

function sources(): string[] {
  const out: string[] = []
  for (const dir of ['lib', 'db', 'handlers', 'scripts']) {
    for (const f of fs.readdirSync(path.join(projectRoot, dir), { recursive: true, encoding: 'utf8' })) {
      if (f.endsWith('.ts')) out.push(path.join(dir, f))
    }
  }
  return out
}

t.test('every code is once in the catalogue, under its category prefix', async (t) => {
  t.equal(byCode.size, entries.length, 'no code twice')
  const prefix: Record<string, string> = { USB: '11', Network: '21', Host: '31', System: '41', General: '51' }
  for (const [name, e] of entries) {
    t.match(e.code, /^0x[0-9A-F]{6}$/, `${name} is 0xCCNNNN`)
    t.equal(e.code.slice(2, 4), prefix[e.category], `${name}: ${e.code} is in ${e.category}`)
    t.ok(e.meaning && !e.meaning.includes('\n'), `${name} has a one-line meaning`)
  }
})

t.test('the code raises event codes only by their catalogue names', async (t) => {
  const literals: string[] = []
  const unknown: string[] = []
  for (const file of sources()) {
    if (file === path.join('lib', 'event-codes.ts')) continue
    const text = fs.readFileSync(path.join(projectRoot, file), 'utf8')
    text.split('\n').forEach((line, i) => {
      // A code in a string is one raised or matched: it must come from the catalogue.
      const literal = /['"`]0x[0-9A-Fa-f]{6}['"`]/.exec(line)
      if (literal) literals.push(`${file}:${i + 1}: ${literal[0]}`)
      // One named in a comment or text must at least be catalogued.
      for (const m of line.matchAll(CODE)) if (!byCode.has(m[0])) unknown.push(`${file}:${i + 1}: ${m[0]}`)
    })
  }
  t.same(literals, [], 'codes named by their catalogue names (lib/event-codes.ts), not as literals')
  t.same(unknown, [], 'every code mentioned is catalogued')
})

t.test('the catalogue is the event-code table of the contract', async (t) => {
  const spec = fs.readFileSync(specPath, 'utf8')
  const rows = [...spec.matchAll(/^\s*\| `(0x[0-9A-F]{6})` \| (.*?) \| (\w+) \| (\d) (\w+) \| (.*) \|$/gm)]
  const severityNames = ['Emergency', 'Alert', 'Critical', 'Error', 'Warning', 'Notice', 'Informational', 'Debug']
  t.same(
    rows.map((r) => r[1]),
    entries.map(([, e]) => e.code),
    'the same codes, in the same order',
  )
  for (const [, code, description, category, severity, severityName, meaning] of rows) {
    const e = byCode.get(code)
    if (!e) continue
    t.same({ description, category, severity: Number(severity), meaning }, { description: e.description, category: e.category, severity: e.severity, meaning: e.meaning }, code)
    t.equal(severityName, severityNames[e.severity], `${code} severity name`)
  }
  // "Risky events (`0x...`, ...) also raise a risk notification."
  const risky = /Risky events \(([^)]*)\) also raise a risk/.exec(spec.replace(/\s+/g, ' '))
  t.ok(risky, 'the contract lists the risky events')
  t.same(
    [...(risky?.[1].matchAll(CODE) ?? [])].map((m) => m[0]).sort(),
    entries
      .filter(([, e]) => e.risk)
      .map(([, e]) => e.code)
      .sort(),
    'the risky events',
  )
})

t.test('the risk kinds are those the database raises', async (t) => {
  const db = new Database(':memory:')
  t.teardown(() => db.close())
  migrate(db)
  const kinds = db.prepare('SELECT event_code, kind FROM risk_notification_kinds ORDER BY event_code').all() as { event_code: string; kind: string }[]
  t.same(
    kinds,
    entries
      .filter(([, e]) => e.risk)
      .map(([, e]) => ({ event_code: e.code, kind: e.risk }))
      .sort((a, b) => a.event_code.localeCompare(b.event_code)),
  )
})
