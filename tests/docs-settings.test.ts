// backend: none — compares the settings list with the documentation and the sources, no app or database
// The settings table of docs/operating.md against the one list that describes the settings
// (SETTINGS, lib/config.ts) and against what the code reads: a setting added to the code
// without a line in the list, a list changed without `npm run docs:settings`, a line left for
// a setting nobody reads or a default that differs from the code's all fail here.
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { SETTINGS } from '../lib/config.js'
import { projectRoot } from '../lib/paths.js'
import { END, operatingPage, START, settingsTable, tableInPage, withSettingsTable } from '../scripts/settings-table.js'

/** Every .ts file under `dir`. */
function sources(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.join(dir, f))
}

/**
 * The environment variables `source` reads: `env.NAME`, `env['NAME']`, and the setting
 * helpers' `(env, 'NAME', ...)`; names in comments or messages are not reads.
 */
export function variablesRead(source: string): Set<string> {
  const names = new Set<string>()
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1')
  for (const m of code.matchAll(/\benv(?:\.([A-Z][A-Z0-9_]*)\b|\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\]|\s*,\s*['"]([A-Z][A-Z0-9_]*)['"])/g)) names.add(m[1] ?? m[2] ?? m[3])
  return names
}

/** The literal default the code gives `name` through `int(env, ...)` / `bool(env, ...)`, when it is one. */
export function codeDefault(source: string, name: string): string | undefined {
  const m = new RegExp(`\\b(int|bool)\\(env, '${name}', (lifted\\(env, [\\d_]+\\)|[^,)]+)`).exec(source)
  if (!m) return undefined
  const expr = m[2].trim()
  if (m[1] === 'bool') return /^(true|false)$/.test(expr) ? expr : undefined
  const lifted = /^lifted\(env, ([\d_]+)\)$/.exec(expr)
  if (lifted) return String(Number(lifted[1].replaceAll('_', '')))
  if (!/^[\d_]+(\s*\*\s*[\d_]+)*$/.test(expr)) return undefined
  return String(expr.split('*').reduce((n, f) => n * Number(f.trim().replaceAll('_', '')), 1))
}

const libFiles = [...sources(path.join(projectRoot, 'lib')), ...sources(path.join(projectRoot, 'db'))]
const read = new Map<string, string[]>()
for (const file of libFiles) {
  for (const name of variablesRead(fs.readFileSync(file, 'utf8'))) read.set(name, [...(read.get(name) ?? []), path.relative(projectRoot, file)])
}
const listed = new Set(SETTINGS.map((s) => s.name))

t.test('the table in docs/operating.md is the one SETTINGS gives', async (t) => {
  const page = fs.readFileSync(operatingPage, 'utf8')
  const inPage = tableInPage(page)
  t.not(inPage, null, `docs/operating.md holds the markers ${START} and ${END}`)
  const fresh = settingsTable()
  t.equal(inPage, fresh, inPage === fresh ? 'the table is current' : 'the table is stale: run npm run docs:settings')
  t.equal(withSettingsTable(page), page, 'writing it again changes nothing')
})

t.test('every variable read in lib/ and db/ is described in SETTINGS, and nothing else', async (t) => {
  t.ok(read.size >= 70, `${read.size} variables read`)
  for (const [name, files] of read) t.ok(listed.has(name), `${name} (read in ${files.join(', ')}) has a line in SETTINGS (lib/config.ts)`)
  for (const name of listed) t.ok(read.has(name), `${name} of SETTINGS is read somewhere in lib/ or db/`)
  t.equal(listed.size, SETTINGS.length, 'no setting is listed twice')
  for (const s of SETTINGS) t.ok(s.default.trim() && s.meaning.trim(), `${s.name} has a default and a meaning`)
})

t.test("each documented default is the code's, where the code gives a literal one", async (t) => {
  const source = libFiles.map((f) => fs.readFileSync(f, 'utf8')).join('\n')
  let compared = 0
  for (const s of SETTINGS) {
    const inCode = codeDefault(source, s.name)
    if (inCode === undefined) continue
    compared++
    // Switches are documented as the words operators type (on/off) or as true/false.
    const documented = /^`([^`]+)`/.exec(s.default)?.[1]?.replace(/^on$/, 'true').replace(/^off$/, 'false')
    t.equal(documented, inCode, `${s.name}: documented default ${s.default}, code ${inCode}`)
  }
  t.ok(compared >= 50, `${compared} defaults compared`)
})

t.test('the checks catch what they are meant to', async (t) => {
  t.same(
    [...variablesRead("const a = env.PRIME_NEW_THING\nconst b = process.env['PRIME_OTHER']\nint(env, 'PRIME_THIRD', 5, 0, 9)\n// env.PRIME_IN_A_COMMENT\n")].sort(),
    ['PRIME_NEW_THING', 'PRIME_OTHER', 'PRIME_THIRD'],
    'reads are found, comments are not reads',
  )
  t.equal(codeDefault("x: int(env, 'PRIME_X', 7 * 86400, 300, 90)", 'PRIME_X'), '604800', 'a product is evaluated')
  t.equal(codeDefault("x: int(env, 'PRIME_X', lifted(env, 60), 1, 9)", 'PRIME_X'), '60', 'a lifted budget gives its own default')
  t.equal(codeDefault("x: bool(env, 'PRIME_X', true)", 'PRIME_X'), 'true')
  const page = `a\n${START}\nold\n${END}\nb\n`
  const table = settingsTable([{ name: 'PRIME_X', default: '`1`', meaning: 'a | b' }])
  t.equal(tableInPage(withSettingsTable(page, table)), table, 'the table is written between the markers')
  t.match(table, 'a \\| b', 'a pipe in a cell is escaped')
  t.not(tableInPage(withSettingsTable(page, table)), tableInPage(page), 'a changed list shows as a difference')
  t.throws(() => withSettingsTable('no markers'), /must hold the markers/)
})
