// Report schedules: validation, and the due times they produce in their time zone
// (daylight-saving gaps and repeats included), computed with luxon's IANA zone data.
import { IANAZone } from 'luxon'
import type { FieldError } from '../errors.js'

export const frequencies = ['once', 'daily', 'weekly', 'monthly'] as const
export type Frequency = (typeof frequencies)[number]
export const daysOfWeek = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'] as const
export type DayOfWeek = (typeof daysOfWeek)[number]

/** A schedule as stored and answered: every field present, unused ones null. */
export interface Schedule {
  frequency: Frequency
  timeOfDay: string
  date: string | null
  dayOfWeek: DayOfWeek | null
  dayOfMonth: number | null
  timeZone: string
}

/** The schedule fields each frequency needs (besides timeOfDay and timeZone, which all take). */
export const frequencyFields: Record<Frequency, ('date' | 'dayOfWeek' | 'dayOfMonth')[]> = {
  once: ['date'],
  daily: [],
  weekly: ['dayOfWeek'],
  monthly: ['dayOfMonth'],
}
export const frequencyTitles: Record<Frequency, string> = { once: 'Once', daily: 'Every day', weekly: 'Every week', monthly: 'Every month' }

export const DEFAULT_TIME_ZONE = 'UTC'

let zones: { list: readonly string[]; byLower: Map<string, string> } | undefined
/** Checking every zone takes a tenth of a second, so it is done on first use, not at start. */
const knownZones = () => {
  if (!zones) {
    const list = [DEFAULT_TIME_ZONE, ...Intl.supportedValuesOf('timeZone').filter((z) => z !== DEFAULT_TIME_ZONE && IANAZone.isValidZone(z))]
    zones = { list, byLower: new Map(list.map((z) => [z.toLowerCase(), z])) }
  }
  return zones
}
/** Every time zone a schedule may name: UTC first, then the IANA zones this runtime knows. */
export const timeZones = (): readonly string[] => knownZones().list

const TIME = /^([01]\d|2[0-3]):([0-5]\d)$/
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/
const MINUTE = 60_000
const DAY = 86_400_000

/** The zone's offset from UTC at an instant, in minutes. */
const offsetAt = (zone: IANAZone, ms: number) => zone.offset(ms)

/**
 * The instant at which the wall clock of `zone` shows the given local time. A time that
 * occurs twice (clocks set back) is its first occurrence; a time that does not occur
 * (clocks set forward) is the first instant after the gap.
 */
export function localInstant(zone: IANAZone, y: number, month: number, d: number, h: number, mi: number): number {
  const wall = Date.UTC(y, month - 1, d, h, mi)
  const offsets = new Set<number>()
  for (const probe of [-DAY, -DAY / 2, 0, DAY / 2, DAY]) offsets.add(offsetAt(zone, wall + probe))
  const valid = [...offsets].map((o) => wall - o * MINUTE).filter((t) => t + offsetAt(zone, t) * MINUTE === wall)
  if (valid.length) return Math.min(...valid)
  // In a gap: the wall clock rises with time around it, so the first instant whose wall
  // time is past the one asked for is found by bisection (offsets stay within ±15 hours).
  let lo = wall - 15 * 3_600_000
  let hi = wall + 15 * 3_600_000
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2)
    if (mid + offsetAt(zone, mid) * MINUTE >= wall) hi = mid
    else lo = mid
  }
  return hi
}

/** The local calendar date of an instant in the zone. */
function localDate(zone: IANAZone, ms: number): { y: number; m: number; d: number } {
  const local = new Date(ms + offsetAt(zone, ms) * MINUTE)
  return { y: local.getUTCFullYear(), m: local.getUTCMonth() + 1, d: local.getUTCDate() }
}

const daysIn = (y: number, m: number) => new Date(Date.UTC(y, m, 0)).getUTCDate()

/** The first due time of the schedule strictly after `afterMs`; null when there is none (a `once` passed). */
export function nextDue(s: Schedule, afterMs: number): number | null {
  const zone = IANAZone.create(s.timeZone)
  if (!zone.isValid) throw new Error(`unknown time zone ${s.timeZone}`)
  const [h, mi] = s.timeOfDay.split(':').map(Number)
  if (s.frequency === 'once') {
    const [y, m, d] = s.date!.split('-').map(Number)
    const t = localInstant(zone, y, m, d, h, mi)
    return t > afterMs ? t : null
  }
  if (s.frequency === 'monthly') {
    const start = localDate(zone, afterMs)
    for (let i = -1; i <= 13; i++) {
      const y = start.y + Math.floor((start.m - 1 + i) / 12)
      const m = ((((start.m - 1 + i) % 12) + 12) % 12) + 1
      const t = localInstant(zone, y, m, Math.min(s.dayOfMonth!, daysIn(y, m)), h, mi)
      if (t > afterMs) return t
    }
    return null
  }
  // Daily and weekly: walk the local days from the day before (a zone far east may
  // already be on the next day).
  const start = localDate(zone, afterMs)
  const weekday = s.frequency === 'weekly' ? daysOfWeek.indexOf(s.dayOfWeek!) : -1
  for (let i = -1; i <= 15; i++) {
    const day = new Date(Date.UTC(start.y, start.m - 1, start.d + i))
    // getUTCDay: 0 is Sunday; daysOfWeek starts on Monday.
    if (weekday >= 0 && (day.getUTCDay() + 6) % 7 !== weekday) continue
    const t = localInstant(zone, day.getUTCFullYear(), day.getUTCMonth() + 1, day.getUTCDate(), h, mi)
    if (t > afterMs) return t
  }
  return null
}

/** The latest due time at or before `nowMs`, starting from a due time known to be at or before it. */
export function latestDue(s: Schedule, firstDue: number, nowMs: number): { due: number; missed: number } {
  let due = firstDue
  let missed = 0
  // Daily over years of downtime is a few thousand steps; a cap keeps a bad clock harmless.
  for (let i = 0; i < 100_000; i++) {
    const next = nextDue(s, due)
    if (next === null || next > nowMs) break
    due = next
    missed++
  }
  return { due, missed }
}

type Input = Partial<Record<keyof Schedule, unknown>> | null | undefined

/**
 * A schedule as sent, checked and completed (unused fields null, the zone's canonical
 * spelling); the problems are added to `errors`, named `schedule/<field>`. `nowMs`: a
 * `once` must lie after it.
 */
export function readSchedule(input: Input, nowMs: number, errors: FieldError[]): Schedule | null {
  if (input === null || input === undefined) return null
  const err = (field: string, reason: string) => errors.push({ location: 'body', name: `schedule/${field}`, reason })
  const before = errors.length
  const frequency = input.frequency as Frequency
  if (!frequencies.includes(frequency)) err('frequency', `must be one of: ${frequencies.join(', ')}`)
  const timeOfDay = String(input.timeOfDay ?? '')
  if (!TIME.test(timeOfDay)) err('timeOfDay', 'must be a 24-hour local time HH:MM')
  let timeZone = DEFAULT_TIME_ZONE
  if (input.timeZone !== undefined && input.timeZone !== null) {
    const known = knownZones().byLower.get(String(input.timeZone).toLowerCase())
    if (known) timeZone = known
    else err('timeZone', `is not a time zone this server knows ("${String(input.timeZone).slice(0, 64)}"); reports/ReportsArguments lists them (e.g. Europe/Paris, America/New_York, UTC)`)
  }
  const needs = frequencies.includes(frequency) ? frequencyFields[frequency] : []
  for (const field of ['date', 'dayOfWeek', 'dayOfMonth'] as const) {
    const given = input[field] !== undefined && input[field] !== null
    if (given && !needs.includes(field)) err(field, `is not used by a ${frequency} schedule: leave it out or null`)
    if (!given && needs.includes(field)) err(field, `is required for a ${frequency} schedule`)
  }
  const s: Schedule = {
    frequency,
    timeOfDay,
    date: needs.includes('date') ? ((input.date as string) ?? null) : null,
    dayOfWeek: needs.includes('dayOfWeek') ? ((input.dayOfWeek as DayOfWeek) ?? null) : null,
    dayOfMonth: needs.includes('dayOfMonth') ? ((input.dayOfMonth as number) ?? null) : null,
    timeZone,
  }
  if (s.date !== null) {
    const m = DATE.exec(s.date)
    if (!m || +m[2] < 1 || +m[2] > 12 || +m[3] < 1 || +m[3] > daysIn(+m[1], +m[2])) err('date', `is not a real date: ${String(s.date).slice(0, 20)}`)
  }
  if (s.dayOfWeek !== null && !daysOfWeek.includes(s.dayOfWeek)) err('dayOfWeek', `must be one of: ${daysOfWeek.join(', ')}`)
  if (s.dayOfMonth !== null && (!Number.isInteger(s.dayOfMonth) || s.dayOfMonth < 1 || s.dayOfMonth > 31)) err('dayOfMonth', 'must be an integer from 1 to 31')
  if (errors.length > before) return null
  if (s.frequency === 'once' && nextDue(s, nowMs) === null) {
    err('date', `${s.date} ${s.timeOfDay} in ${s.timeZone} has already passed: a once schedule must be in the future`)
    return null
  }
  return s
}
