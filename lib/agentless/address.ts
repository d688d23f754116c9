// Which addresses an agentless connection may point at: a DNS name or an IP address that
// can be a host. Unspecified, broadcast, multicast and link-local addresses (the cloud
// metadata services among them) are refused, so that the poller is not turned on them.
// IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are
// judged by that IPv4 address.
import ipaddr from 'ipaddr.js'
import { parseIp, reachedAddresses } from '../ip-address.js'

const REFUSED_RANGES = new Set(['unspecified', 'broadcast', 'multicast', 'linkLocal'])
// Metadata services reachable at addresses or names outside the link-local range.
const METADATA = new Set(['fd00:ec2::254', '100.100.100.200', '168.63.129.16', 'metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal'])
const LABEL = /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/

/** Why the address cannot be used, or null when it can. */
export function addressProblem(address: string): string | null {
  if (address.length === 0 || address.length > 253) return 'must have 1 to 253 characters'
  const lower = address.toLowerCase().replace(/\.$/, '')
  if (METADATA.has(lower)) return 'is a cloud metadata service, which a connection may not point at'
  if (address.includes(':')) {
    const ip = parseIp(address)
    if (!ip || ip.kind() !== 'ipv6') return 'is not a valid IPv6 address'
    for (const reached of reachedAddresses(ip)) {
      const problem = ipProblem(reached)
      if (problem) return problem
    }
    return null
  }
  if (/^[\d.]+$/.test(address)) {
    if (!ipaddr.IPv4.isValidFourPartDecimal(address)) return 'is not a valid IPv4 address (four numbers from 0 to 255)'
    return ipProblem(ipaddr.IPv4.parse(address))
  }
  if (address.includes('%')) return 'may hold a zone (%) only in an IPv6 address'
  const labels = lower.split('.')
  if (labels.some((l) => !LABEL.test(l))) return 'is not a valid host name (labels of letters, digits, - and _, 1 to 63 characters, not starting or ending with -)'
  return null
}

function ipProblem(ip: ipaddr.IPv4 | ipaddr.IPv6): string | null {
  const range = ip.range()
  if (REFUSED_RANGES.has(range)) {
    const what = { unspecified: 'unspecified', broadcast: 'a broadcast address', multicast: 'a multicast address', linkLocal: 'link-local (this includes the cloud metadata address)' }[
      range as 'unspecified'
    ]
    return `is ${what}, which a connection may not point at`
  }
  if (METADATA.has(ip.toString())) return 'is a cloud metadata service, which a connection may not point at'
  return null
}

/** Whether the address is an IP address (rather than a name). */
export const isIp = (address: string) => ipaddr.isValid(address) && (address.includes(':') || ipaddr.IPv4.isValidFourPartDecimal(address))
