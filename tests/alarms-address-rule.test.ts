// backend: none — pure functions: no app is built and no database opened
// The address rule (SSRF) of alarm destinations, as a unit: which addresses and names a
// webhook or syslog destination may reach, with and without the allow-list.
import t from 'tap'
import { AddressRefusedError, allowList, checkAddress, resolveChecked, type Resolver } from '../lib/alarms/address.js'

const none = allowList([])

function verdict(address: string, host = address, allow = none): string {
  try {
    checkAddress(address, host, allow)
    return 'allowed'
  } catch (err) {
    if (err instanceof AddressRefusedError) return err.kind
    throw err
  }
}

t.test('link-local and cloud metadata addresses are always refused, whatever the allow-list', async (t) => {
  const everything = allowList(['0.0.0.0/0', '::/0', '169.254.169.254', 'fe80::1', '100.100.100.200', '168.63.129.16', 'fd00:ec2::254'])
  for (const a of ['169.254.169.254', '169.254.0.1', '169.254.255.255', 'fe80::1', 'febf:ffff::1', 'fd00:ec2::254', '100.100.100.200', '168.63.129.16']) {
    t.equal(verdict(a), 'metadata', a)
    t.equal(verdict(a, a, everything), 'metadata', `${a} despite the allow-list`)
  }
  // IPv4-mapped and NAT64 forms reach the same IPv4 address.
  t.equal(verdict('::ffff:169.254.169.254'), 'metadata', 'IPv4-mapped metadata')
  t.equal(verdict('::ffff:a9fe:a9fe'), 'metadata', 'IPv4-mapped metadata in hex')
  t.equal(verdict('64:ff9b::a9fe:a9fe'), 'metadata', 'NAT64 metadata')
  // Neighbours of the single metadata addresses are ordinary addresses.
  t.equal(verdict('169.253.255.255'), 'allowed')
  t.equal(verdict('100.100.100.201'), 'allowed')
  t.equal(verdict('168.63.129.17'), 'allowed')
  t.equal(verdict('fec0::1'), 'allowed', 'just outside fe80::/10')
})

t.test('unspecified, broadcast and multicast addresses are always refused', async (t) => {
  const everything = allowList(['0.0.0.0/0', '::/0'])
  for (const a of ['0.0.0.0', '0.1.2.3', '0.255.255.255', '::', '255.255.255.255', '224.0.0.1', '239.255.255.250', 'ff02::1', 'ff0e::1', '::ffff:224.0.0.5']) {
    t.equal(verdict(a), 'special', a)
    t.equal(verdict(a, a, everything), 'special', `${a} despite the allow-list`)
  }
  t.equal(verdict('1.0.0.0'), 'allowed')
  t.equal(verdict('223.255.255.255'), 'allowed')
  t.equal(verdict('255.255.255.254'), 'allowed', 'only the limited broadcast address is refused')
})

t.test('loopback is refused unless its name or address is in the allow-list', async (t) => {
  for (const a of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) t.equal(verdict(a), 'loopback', a)
  const one = allowList(['127.0.0.1'])
  t.equal(verdict('127.0.0.1', '127.0.0.1', one), 'allowed')
  t.equal(verdict('::ffff:127.0.0.1', '::ffff:127.0.0.1', one), 'allowed', 'the mapped form is the same address')
  t.equal(verdict('127.0.0.2', '127.0.0.2', one), 'loopback', 'another loopback address is not listed')
  t.equal(verdict('::1', '::1', one), 'loopback')
  const range = allowList([' 127.0.0.0/8 ', '::1'])
  t.equal(verdict('127.200.1.1', '127.200.1.1', range), 'allowed', 'a CIDR entry')
  t.equal(verdict('::1', '::1', range), 'allowed')
  t.equal(verdict('::1', '[::1]', allowList(['[::1]'])), 'allowed', 'an address listed in brackets')
  const byName = allowList(['LocalHost'])
  t.equal(verdict('127.0.0.1', 'localhost', byName), 'allowed', 'the host name is listed (case-insensitive)')
  t.equal(verdict('::1', 'localhost.', byName), 'allowed', 'a trailing dot is the same name')
  t.equal(verdict('127.0.0.1', '127.0.0.1', byName), 'loopback', 'the address itself is not listed')
  t.equal(verdict('10.0.0.1', 'svc.localhost'), 'loopback', 'a *.localhost name counts as loopback whatever it resolves to')
})

t.test('a loopback refusal names what to list, each form once', async (t) => {
  const message = (address: string, host: string) => {
    try {
      checkAddress(address, host, allowList([]))
    } catch (err) {
      return (err as Error).message
    }
    return 'allowed'
  }
  t.match(message('127.0.0.1', '127.0.0.1'), /allowed only when 127\.0\.0\.1 is listed in PRIME_ALARM_ALLOWED_HOSTS/)
  t.match(message('::1', '[::1]'), /allowed only when ::1 is listed/)
  t.match(message('127.0.0.1', 'localhost'), /allowed only when localhost or 127\.0\.0\.1 is listed/)
})

t.test('private, shared and public addresses are allowed', async (t) => {
  for (const a of ['10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', 'fc00::1', 'fd12:3456::1', '100.64.0.1', '8.8.8.8', '2001:db8::1', '::ffff:10.0.0.1']) {
    t.equal(verdict(a), 'allowed', a)
  }
})

t.test('names: metadata names are refused before any lookup; every resolved address is checked', async (t) => {
  let lookups = 0
  const resolver =
    (answers: Record<string, { address: string; family: number }[]>): Resolver =>
    async (host) => {
      lookups++
      const found = answers[host]
      if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' })
      return found
    }
  const r = resolver({
    'siem.example.com': [{ address: '10.0.0.5', family: 4 }],
    'mixed.example.com': [
      { address: '10.0.0.5', family: 4 },
      { address: '169.254.169.254', family: 4 },
    ],
    'loop.example.com': [{ address: '127.0.0.1', family: 4 }],
    'v6.example.com': [{ address: 'fd00::5', family: 6 }],
    'empty.example.com': [],
  })
  const refused = async (host: string, allow = none) => {
    try {
      await resolveChecked(host, allow, r)
      return 'allowed'
    } catch (err) {
      if (err instanceof AddressRefusedError) return `${err.kind}: ${err.message}`
      throw err
    }
  }
  for (const name of ['metadata.google.internal', 'METADATA.Google.Internal.', 'metadata.azure.internal', 'instance-data']) {
    t.match(await refused(name, allowList([name])), /^metadata: the host .* is a cloud metadata name/, name)
  }
  t.equal(lookups, 0, 'metadata names are never looked up')
  t.same(await resolveChecked('siem.example.com', none, r), { address: '10.0.0.5', family: 4 })
  t.same(await resolveChecked('v6.example.com', none, r), { address: 'fd00::5', family: 6 })
  t.match(await refused('mixed.example.com'), /^metadata: the address 169\.254\.169\.254/, 'one refused address refuses the name')
  t.match(await refused('loop.example.com'), /^loopback: /)
  t.equal(await refused('loop.example.com', allowList(['loop.example.com'])), 'allowed', 'a listed name may resolve to loopback')
  t.equal(await refused('loop.example.com', allowList(['127.0.0.0/8'])), 'allowed', 'or its addresses may be listed')
  t.match(await refused('nowhere.example.com'), /^unresolvable: the host nowhere\.example\.com does not resolve \(ENOTFOUND\)/)
  t.match(await refused('empty.example.com'), /^unresolvable: /)
  t.match(await refused('bad host'), /^invalid: /)
  t.match(await refused('-leading.example.com'), /^invalid: /)
  t.same(await resolveChecked('[::1]', allowList(['::1']), r), { address: '::1', family: 6 }, 'an IPv6 literal in brackets')
  t.match(await refused('169.254.169.254'), /^metadata: /, 'literals are checked without a lookup')
})

t.test('the system resolver: localhost is loopback', async (t) => {
  await t.rejects(resolveChecked('localhost', none), { kind: 'loopback' })
  t.match(await resolveChecked('localhost', allowList(['localhost'])), { address: /^(127\.0\.0\.1|::1)$/ })
  await t.rejects(resolveChecked('no-such-host.invalid', none), { kind: 'unresolvable' })
})
