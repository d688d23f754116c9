// Past the year 9999 toISOString writes six-digit years (and fractions of a millisecond are
// cut): those take the slow path.
const FAST_MAX = 253402300800000

const DAY = 86_400_000
// `YYYY-MM-DDT` of the days formatted lately (a page's times fall on a few days).
const dayPrefixes = new Map<number, string>()
const two = (n: number) => (n < 10 ? '0' : '') + n

/**
 * UTC ISO 8601 with milliseconds and Z, the one time format of every answer. The date part
 * of each day is formatted once and kept, the time of day is computed: about 80 ns a time
 * against 600 for toISOString, whether a page's times share a minute (events) or fall on
 * different days (an agent's last update, configuration and license expiry).
 */
export function iso(ms: number): string {
  if (!(ms >= 0 && ms < FAST_MAX) || !Number.isInteger(ms)) return new Date(ms).toISOString()
  const day = Math.floor(ms / DAY)
  let prefix = dayPrefixes.get(day)
  if (prefix === undefined) {
    if (dayPrefixes.size >= 4096) dayPrefixes.clear()
    prefix = new Date(day * DAY).toISOString().slice(0, 11)
    dayPrefixes.set(day, prefix)
  }
  let rest = ms - day * DAY
  const h = Math.floor(rest / 3_600_000)
  rest -= h * 3_600_000
  const m = Math.floor(rest / 60_000)
  rest -= m * 60_000
  const s = Math.floor(rest / 1000)
  const milli = rest - s * 1000
  return prefix + two(h) + ':' + two(m) + ':' + two(s) + (milli < 10 ? '.00' : milli < 100 ? '.0' : '.') + milli + 'Z'
}
