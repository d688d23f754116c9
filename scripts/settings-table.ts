// Writes the settings table of docs/operating.md from SETTINGS (lib/config.ts), between its
// two markers, so that the page cannot drift from the settings the server reads
// (tests/docs-settings.test.ts fails when the page is stale: run `npm run docs:settings`).
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { SETTINGS, type SettingDescription } from '../lib/config.js'
import { projectRoot } from '../lib/paths.js'

export const operatingPage = path.join(projectRoot, 'docs', 'operating.md')
export const START = '<!-- settings-table:start (written by npm run docs:settings from lib/config.ts) -->'
export const END = '<!-- settings-table:end -->'

/** The Markdown table of `settings`, one row each, in their order. */
export function settingsTable(settings: readonly SettingDescription[] = SETTINGS): string {
  // A pipe would end a cell early: Markdown tables take it escaped.
  const cell = (s: string) => s.replaceAll('|', '\\|').replaceAll('\n', ' ')
  const rows = settings.map((s) => `| \`${s.name}\` | ${cell(s.default)} | ${cell(s.meaning)} |`)
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n')
}

/** `page` with the text between its markers replaced by the table; throws when a marker is missing. */
export function withSettingsTable(page: string, table: string = settingsTable()): string {
  const start = page.indexOf(START)
  const end = page.indexOf(END)
  if (start < 0 || end < start) throw new Error(`docs/operating.md must hold the markers ${START} and ${END}, in this order`)
  return `${page.slice(0, start + START.length)}\n${table}\n${page.slice(end)}`
}

/** The table as it stands in `page` (between the markers), or null without them. */
export function tableInPage(page: string): string | null {
  const start = page.indexOf(START)
  const end = page.indexOf(END)
  if (start < 0 || end < start) return null
  return page.slice(start + START.length, end).trim()
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const page = fs.readFileSync(operatingPage, 'utf8')
  const next = withSettingsTable(page)
  if (next !== page) fs.writeFileSync(operatingPage, next)
  console.log(`${next === page ? 'unchanged' : 'wrote'} ${path.relative(process.cwd(), operatingPage)} (${SETTINGS.length} settings)`)
}
