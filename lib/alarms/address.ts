// The address rule of alarm destinations (SSRF): which addresses a webhook or syslog
// destination may reach. Checked when a destination is saved and again at each delivery,
// which then connects to the address checked (never looking the name up a second time).
import dns from 'node:dns/promises'
import net from 'node:net'
import { cidr, inRanges, parseIp, PRIVATE, reachedAddresses, reachedRange, type Addr, type Range } from '../ip-address.js'
import { cacheIn, type CacheRegistry } from '../platform/cache.js'

/** Link-local and cloud metadata: never reachable, whatever the allow-list says. */
const METADATA = ['169.254.0.0/16', 'fe80::/10', 'fd00:ec2::254/128', '100.100.100.200/32', '168.63.129.16/32'].map(cidr)
const METADATA_NAMES = new Set(['metadata.google.internal', 'metadata.azure.internal', 'instance-data'])
/** Unspecified, broadcast and multicast: never reachable. */
const SPECIAL = ['0.0.0.0/8', '::/128', '255.255.255.255/32', '224.0.0.0/4', 'ff00::/8'].map(cidr)
/** Loopback: reachable only through the allow-list. */
const LOOPBACK = ['127.0.0.0/8', '::1/128'].map(cidr)

export type RefusalKind = 'metadata' | 'special' | 'loopback' | 'private' | 'unresolvable' | 'invalid'

export class AddressRefusedError extends Error {
  constructor(
    readonly kind: RefusalKind,
    /** Short, for the problem's `errors[].reason`. */
    readonly reason: string,
    message: string,
  ) {
    super(message)
  }
}

export interface AllowList {
  names: Set<string>
  ranges: Range[]
  /** PRIME_ALARM_DENY_PRIVATE: private addresses only through the allow-list, like loopback. */
  denyPrivate: boolean
}

const normalName = (host: string) => host.toLowerCase().replace(/\.$/, '')

/** Parses `PRIME_ALARM_ALLOWED_HOSTS` entries: host names, addresses or CIDR ranges. */
export function allowList(entries: string[], denyPrivate = false): AllowList {
  const names = new Set<string>()
  const ranges: Range[] = []
  for (const raw of entries) {
    const entry = raw.trim()
    if (!entry) continue
    const slash = entry.lastIndexOf('/')
    const base = slash > 0 ? parseIp(entry.slice(0, slash)) : null
    const bits = slash > 0 ? Number(entry.slice(slash + 1)) : NaN
    const single = parseIp(entry)
    if (base && /^\d{1,3}$/.test(entry.slice(slash + 1)) && bits <= (base.kind() === 'ipv4' ? 32 : 128)) ranges.push(reachedRange([base, bits]))
    else if (single) {
      const a = reachedAddresses(single)[0]
      ranges.push([a, a.kind() === 'ipv4' ? 32 : 128])
    } else names.add(normalName(entry))
  }
  return { names, ranges, denyPrivate }
}

const stripBrackets = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host)

const isLoopbackName = (name: string) => name === 'localhost' || name.endsWith('.localhost')

/**
 * Checks one address reached for `host` (the name as configured, or the address itself).
 * An IPv6 form that carries an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) is
 * judged by that IPv4 address. Throws AddressRefusedError when the rule refuses it.
 */
export function checkAddress(address: string, host: string, allow: AllowList): void {
  const parsed = parseIp(address)
  if (!parsed) throw new AddressRefusedError('invalid', 'not an IP address', `${address} is not an IP address.`)
  const name = normalName(stripBrackets(host))
  for (const a of reachedAddresses(parsed)) checkOne(a, a === parsed ? a.toString() : `${a} (carried by ${parsed})`, name, host, allow)
}

function checkOne(a: Addr, shown: string, name: string, host: string, allow: AllowList): void {
  if (inRanges(a, METADATA)) {
    throw new AddressRefusedError('metadata', 'link-local or cloud metadata address', `the address ${shown} is a link-local or cloud metadata address and is never allowed.`)
  }
  if (inRanges(a, SPECIAL)) {
    throw new AddressRefusedError('special', 'unspecified, broadcast or multicast address', `the address ${shown} is an unspecified, broadcast or multicast address and is never allowed.`)
  }
  const listed = allow.names.has(name) || inRanges(a, allow.ranges)
  // Named once when the destination was given as the address itself.
  const listable = name === normalName(shown) || stripBrackets(host) === shown ? shown : `${host} or ${shown}`
  if ((inRanges(a, LOOPBACK) || isLoopbackName(name)) && !listed) {
    throw new AddressRefusedError(
      'loopback',
      'loopback address not in PRIME_ALARM_ALLOWED_HOSTS',
      `the address ${shown} is a loopback address, allowed only when ${listable} is listed in PRIME_ALARM_ALLOWED_HOSTS.`,
    )
  }
  if (allow.denyPrivate && inRanges(a, PRIVATE) && !listed) {
    throw new AddressRefusedError(
      'private',
      'private address not in PRIME_ALARM_ALLOWED_HOSTS',
      `the address ${shown} is a private address (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7); with PRIME_ALARM_DENY_PRIVATE on, it is allowed only when ${listable} is listed in PRIME_ALARM_ALLOWED_HOSTS.`,
    )
  }
}

const HOST_NAME = /^(?=.{1,253}$)([a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?)(\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?)*\.?$/i

/** Whether `host` is written as a host name or an IP address (IPv6 possibly in brackets). */
export const isHostSyntax = (host: string) => net.isIP(stripBrackets(host)) !== 0 || HOST_NAME.test(host)

export interface CheckedAddress {
  /** The address to connect to. */
  address: string
  family: 4 | 6
}

export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>
const LOOKUP_TIMEOUT_MS = 5000

const systemResolver: Resolver = (host) => dns.lookup(host, { all: true, verbatim: true })

/** How long the delivery worker keeps what a host name resolved to. */
export const RESOLVED_TTL_MS = 5000
const RESOLVED_MAX = 256

/**
 * A resolver that keeps each name's addresses for a few seconds (the delivery worker's:
 * one lookup per host every few seconds instead of one per request). Only the lookup is
 * kept: resolveChecked applies the address rule to the kept addresses on every use, and a
 * DNS change is seen within the time kept. Failed lookups are not kept.
 */
export function keptResolver(ttlMs = RESOLVED_TTL_MS, resolve: Resolver = systemResolver, now: () => number = () => performance.now(), caches?: CacheRegistry): Resolver {
  // Destinations are few (at most 100): past RESOLVED_MAX names, the least recently used go.
  const kept = cacheIn<string, { address: string; family: number }[]>(caches, {
    name: 'alarm-host-lookups',
    signal: `${ttlMs / 1000} s passing (a DNS change is seen within them)`,
    max: RESOLVED_MAX,
    maxBytes: 256 * 1024,
    ttlMs,
    now,
  })
  return async (host) => {
    const hit = kept.get(host)
    if (hit) return hit
    const found = await resolve(host)
    if (found.length) kept.set(host, found)
    return found
  }
}

/**
 * Resolves `host` and checks every address it resolves to (one refused address refuses
 * the host: a name must not be able to point at a forbidden address among allowed ones).
 * Answers the address to connect to.
 */
export async function resolveChecked(host: string, allow: AllowList, resolve: Resolver = systemResolver): Promise<CheckedAddress> {
  const bare = stripBrackets(host)
  if (net.isIP(bare)) {
    checkAddress(bare, host, allow)
    return { address: bare, family: net.isIP(bare) as 4 | 6 }
  }
  const name = normalName(bare)
  if (METADATA_NAMES.has(name)) {
    throw new AddressRefusedError('metadata', 'cloud metadata host name', `the host ${host} is a cloud metadata name and is never allowed.`)
  }
  if (!isHostSyntax(bare)) throw new AddressRefusedError('invalid', 'not a host name or address', `${host} is not a host name or address.`)
  let found: { address: string; family: number }[]
  let timer: NodeJS.Timeout | undefined
  try {
    found = await Promise.race([
      resolve(bare),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error('timed out'), { code: 'ETIMEOUT' })), LOOKUP_TIMEOUT_MS)
      }),
    ])
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error'
    throw new AddressRefusedError('unresolvable', 'does not resolve', `the host ${host} does not resolve (${code}).`)
  } finally {
    clearTimeout(timer)
  }
  if (found.length === 0) throw new AddressRefusedError('unresolvable', 'does not resolve', `the host ${host} does not resolve.`)
  for (const f of found) checkAddress(f.address, host, allow)
  return { address: found[0].address, family: found[0].family === 6 ? 6 : 4 }
}
