// The filters of the agentless status list, read from its query or from an export body
// that mirrors it (same names, matched case-insensitively).
import type { AgentlessFilter } from './ports.js'
import { invalidField } from '../errors.js'
import { bool, date, type Where } from '../listing.js'

type Source = Record<string, unknown>
const DAY_MS = 86_400_000

const textNames = {
  computerName: 'ComputerName',
  statusString: 'StatusString',
  statusDescription: 'StatusDescription',
  statusErrorDescription: 'StatusErrorDescription',
  prevRunningErrors: 'PrevRunningErrors',
  globalSearch: 'GlobalSearch',
} as const

function text(src: Source, name: string): string | undefined {
  const v = src[name]
  if (v === undefined || v === null || v === '') return undefined
  return typeof v === 'string' ? v : String(v)
}

/** The UTC calendar day written in a date filter: its time part (and zone) is ignored. */
function day(src: Source, name: string, where: Where): [number, number] | undefined {
  const v = text(src, name)
  if (v === undefined) return undefined
  date(v, name, where)
  const [y, m, d] = v.trim().slice(0, 10).split('-').map(Number)
  const from = Date.UTC(y, m - 1, d)
  return [from, from + DAY_MS]
}

export function agentlessFilter(src: Source | null | undefined, where: Where): AgentlessFilter {
  const s = src ?? {}
  const f: AgentlessFilter = {}
  for (const [key, name] of Object.entries(textNames) as [keyof typeof textNames, string][]) {
    const v = text(s, name)
    if (v === undefined) continue
    if (v.includes('\u0000')) throw invalidField(where, name, 'must not contain the NUL character')
    f[key] = v
  }
  const set = <K extends keyof AgentlessFilter>(key: K, value: AgentlessFilter[K] | undefined) => {
    if (value !== undefined) f[key] = value
  }
  set('startDay', day(s, 'StartTime', where))
  set('endDay', day(s, 'EndTime', where))
  set('fromStart', date(text(s, 'FromTimeStart'), 'FromTimeStart', where))
  set('toStart', date(text(s, 'ToTimeStart'), 'ToTimeStart', where))
  set('fromEnd', date(text(s, 'FromTimeEnd'), 'FromTimeEnd', where))
  set('toEnd', date(text(s, 'ToTimeEnd'), 'ToTimeEnd', where))
  set('isOverrideDefaults', bool(text(s, 'IsOverrideDefaults'), 'IsOverrideDefaults', where))
  return f
}

/** The filters given, as label and value (PDF header, audit details). */
export function givenFilters(src: Source | null | undefined): [string, string][] {
  if (!src) return []
  return Object.entries(src)
    .filter(([k, v]) => v !== null && v !== undefined && v !== '' && k !== 'SortBy')
    .map(([k, v]) => [k, String(v)])
}
