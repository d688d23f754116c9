// The figures of ARCHITECTURE.md that the tree decides (the import edges between rooms), made
// from the tree so that they cannot drift: `npm run docs:architecture` writes them between
// the page's `figures` markers, and tests/architecture-figures.test.ts fails when they differ.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { projectRoot } from '../lib/paths.js'

type Room = 'db' | 'handlers' | 'generated' | 'wiring' | 'feature' | 'platform' | 'other'

const WIRING = new Set(['lib/app.ts', 'lib/services.ts', 'lib/repos.ts', 'lib/repos-postgres.ts', 'lib/server.ts'])

/** The room of a source file: see ARCHITECTURE.md "Rooms, and what each may import". */
export function roomOf(file: string): Room {
  if (file.startsWith('db/')) return 'db'
  if (file.startsWith('handlers/')) return 'handlers'
  if (file.startsWith('generated/')) return 'generated'
  if (WIRING.has(file) || /^lib\/[^/]+\/index\.ts$/.test(file)) return file.startsWith('lib/platform/') ? 'platform' : 'wiring'
  if (file.startsWith('lib/platform/')) return 'platform'
  if (/^lib\/[^/]+\//.test(file)) return 'feature'
  if (file.startsWith('lib/')) return 'platform'
  return 'other'
}

interface Module {
  source: string
  dependencies: { resolved: string; module: string; coreModule: boolean }[]
}

function modules(): Module[] {
  const bin = path.join(projectRoot, 'node_modules', '.bin', 'depcruise')
  const args = ['lib', 'db', 'handlers', 'generated', '--config', path.join(projectRoot, '.dependency-cruiser.cjs'), '--output-type', 'json']
  const r = spawnSync(bin, args, { cwd: projectRoot, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
  if (!r.stdout) throw new Error(`depcruise gave nothing: ${r.stderr}`)
  return (JSON.parse(r.stdout) as { modules: Module[] }).modules.filter((m) => /\.ts$/.test(m.source))
}

/** The table's "now" column, in the table's row order. */
export function figures(): { row: string; now: string }[] {
  const mods = modules()
  const fastify = (m: Module) => m.dependencies.some((d) => d.module === 'fastify' || /node_modules\/fastify\//.test(d.resolved))
  // A module importing a module of another room counts once.
  const edges = (from: (r: Room) => boolean, to: (r: Room, file: string) => boolean) =>
    mods.filter((m) => from(roomOf(m.source))).reduce((n, m) => n + new Set(m.dependencies.filter((d) => to(roomOf(d.resolved), d.resolved)).map((d) => d.resolved)).size, 0)
  const lib = mods.filter((m) => m.source.startsWith('lib/'))
  const is =
    (...rooms: Room[]) =>
    (r: Room) =>
      rooms.includes(r)
  return [
    {
      row: '`db` -> `lib` (but the ports it implements and the cache registry), `generated`',
      now: String(edges(is('db'), (r, f) => r === 'generated' || (f.startsWith('lib/') && !f.endsWith('/ports.ts') && f !== 'lib/platform/cache.ts'))),
    },
    { row: '`handlers` -> `db`', now: String(edges(is('handlers'), is('db'))) },
    { row: 'features -> `fastify` (files)', now: String(mods.filter((m) => roomOf(m.source) === 'feature' && fastify(m)).length) },
    { row: '`lib` files importing `fastify`', now: `${lib.filter(fastify).length} of ${lib.length} (the wiring and the platform)` },
    { row: '`handlers` -> features / platform', now: `${edges(is('handlers'), is('feature'))} / ${edges(is('handlers'), is('platform'))}` },
    { row: 'features -> `db`', now: String(edges(is('feature'), is('db'))) },
    { row: 'wiring -> features / `db`', now: `${edges(is('wiring'), is('feature'))} / ${edges(is('wiring'), is('db'))}` },
  ]
}

const BEFORE: Record<string, string> = {
  '`db` -> `lib` (but the ports it implements and the cache registry), `generated`': '26',
  '`handlers` -> `db`': '15',
  'features -> `fastify` (files)': '17',
  '`lib` files importing `fastify`': '38 of 81',
  '`handlers` -> features / platform': '25 / 54',
  'features -> `db`': '32',
  'wiring -> features / `db`': '13 / 30',
}

/** The block between the markers, as the tree gives it. */
export function figuresBlock(): string {
  return ['| from -> to | before the rooms were drawn | now |', '|---|---|---|', ...figures().map((f) => `| ${f.row} | ${BEFORE[f.row]} | ${f.now} |`)].join('\n')
}

export const ARCHITECTURE = path.join(projectRoot, 'ARCHITECTURE.md')
const MARKS = /(<!-- figures: npm run docs:architecture -->\n)([\s\S]*?)(\n<!-- figures end -->)/

/** The block the page holds now. */
export function pageBlock(text = fs.readFileSync(ARCHITECTURE, 'utf8')): string | null {
  return MARKS.exec(text)?.[2] ?? null
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename ?? '')) {
  const text = fs.readFileSync(ARCHITECTURE, 'utf8')
  if (pageBlock(text) === null) throw new Error('ARCHITECTURE.md has no figures markers')
  const block = figuresBlock()
  fs.writeFileSync(
    ARCHITECTURE,
    text.replace(MARKS, (_, a, _b, c) => `${a}${block}${c}`),
  )
  console.log(block)
}
