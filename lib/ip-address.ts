// IP addresses as the operating system connects to them, for the address rules of alarm
// destinations and agentless connections. Two traps: ipaddr.js reads `::a.b.c.d` as the
// IPv4-mapped `::ffff:a.b.c.d` (the system reaches `::a.b.c.d`, IPv4-compatible), so text
// is first written in canonical form; and several IPv6 forms carry an IPv4 address that
// translation or tunnelling then reaches, so a rule must judge that IPv4 address.
import net from 'node:net'
import ipaddr from 'ipaddr.js'

export type Addr = ipaddr.IPv4 | ipaddr.IPv6
export type Range = [Addr, number]

export const cidr = (s: string): Range => ipaddr.parseCIDR(s) as Range

const stripBrackets = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host)

/**
 * The address written in `text` (an IPv6 one possibly in brackets or with a zone), or null
 * when it is not an IP address as the system's own parser reads them (four-part decimal
 * IPv4 only: `127.1` and `0x7f.0.0.1` are names to the resolver, not addresses).
 */
export function parseIp(text: string): Addr | null {
  const bare = stripBrackets(text)
  const kind = net.isIP(bare)
  if (kind === 4) return ipaddr.IPv4.parse(bare)
  if (kind !== 6) return null
  // The WHATWG URL serializer writes the 16 bytes in hexadecimal groups only.
  const noZone = bare.replace(/%.*$/, '')
  return ipaddr.IPv6.parse(new URL(`http://[${noZone}]/`).hostname.slice(1, -1))
}

const v4 = (b: number[]) => new ipaddr.IPv4(b.map((x) => x & 0xff))

/**
 * IPv6 forms that carry an IPv4 address, and where it sits in the 16 bytes. `at` lists the
 * positions; with `zeroFrom`, a position counts only when the bytes from that index on are
 * zero (RFC 6052 formats shorter than /96 end in a zero suffix).
 */
const CARRIERS: { range: Range; at: number[][]; zeroFrom?: number[]; xor?: number }[] = [
  // IPv4-mapped (::ffff:0:0/96) and SIIT-translated (::ffff:0:0:0/96).
  { range: cidr('::ffff:0:0/96'), at: [[12, 13, 14, 15]] },
  { range: cidr('::ffff:0:0:0/96'), at: [[12, 13, 14, 15]] },
  // IPv4-compatible (::/96, deprecated); `::` and `::1` are themselves, see below.
  { range: cidr('::/96'), at: [[12, 13, 14, 15]] },
  // NAT64 well-known prefix (RFC 6052).
  { range: cidr('64:ff9b::/96'), at: [[12, 13, 14, 15]] },
  // NAT64 local-use prefix (RFC 8215): the operator picks the prefix length, so every
  // RFC 6052 position that fits is a candidate (/48, /56, /64, /96).
  {
    range: cidr('64:ff9b:1::/48'),
    at: [
      [6, 7, 9, 10],
      [7, 9, 10, 11],
      [9, 10, 11, 12],
      [12, 13, 14, 15],
    ],
    zeroFrom: [11, 12, 13, 16],
  },
  // 6to4 (RFC 3056): the relay sends to the IPv4 address after the prefix.
  { range: cidr('2002::/16'), at: [[2, 3, 4, 5]] },
  // Teredo (RFC 4380): the client's IPv4 address, inverted, in the last 32 bits.
  { range: cidr('2001::/32'), at: [[12, 13, 14, 15]], xor: 0xff },
]
const SELF = [cidr('::/128'), cidr('::1/128')]

/**
 * The addresses a connection to `a` may end up at: the IPv4 addresses carried by an IPv6
 * transition form (mapped, compatible, SIIT, NAT64, 6to4, Teredo), or `a` itself.
 */
export function reachedAddresses(a: Addr): Addr[] {
  if (a.kind() === 'ipv4') return [a]
  const v6 = a as ipaddr.IPv6
  if (SELF.some(([base, bits]) => v6.match(base, bits))) return [a]
  const bytes = v6.toByteArray()
  for (const c of CARRIERS) {
    if (!v6.match(c.range[0], c.range[1])) continue
    const fits = (k: number) => !c.zeroFrom || bytes.slice(c.zeroFrom[k]).every((b) => b === 0)
    return c.at.filter((_, k) => fits(k)).map((pos) => v4(pos.map((i) => bytes[i] ^ (c.xor ?? 0))))
  }
  return [a]
}

/** The IPv4 range a `/96` transition-form range stands for (allow-list entries), or the range itself. */
export function reachedRange([a, bits]: Range): Range {
  if (a.kind() === 'ipv6' && bits >= 96) {
    const carried = reachedAddresses(a)
    if (carried.length === 1 && carried[0] !== a) return [carried[0], bits - 96]
  }
  return [a, bits]
}

export const inRanges = (a: Addr, ranges: Range[]) => ranges.some(([base, bits]) => base.kind() === a.kind() && a.match(base, bits))

/** Private networks: RFC 1918, shared address space (CGNAT, RFC 6598) and unique local IPv6. */
export const PRIVATE = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', 'fc00::/7'].map(cidr)
