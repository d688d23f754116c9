// IPv6 forms that carry an IPv4 address (IPv4-compatible, mapped, SIIT, NAT64, 6to4,
// Teredo) are judged as that IPv4 address, by every rule that decides where the server
// (or a poller) connects on a user's word: alarm webhooks and syslog, agentless connections.
// And the private-range policy of alarm destinations (PRIME_ALARM_DENY_PRIVATE).
import t from 'tap'
import { AddressRefusedError, allowList, checkAddress } from '../lib/alarms/address.js'
import { addressProblem } from '../lib/agentless/address.js'
import { parseIp, reachedAddresses } from '../lib/ip-address.js'
import { build, call, login } from './helpers.js'
import { ALARM_PATH } from './fixtures/receivers.js'

function verdict(address: string, allow = allowList([]), host = address): string {
  try {
    checkAddress(address, host, allow)
    return 'allowed'
  } catch (err) {
    if (err instanceof AddressRefusedError) return err.kind
    throw err
  }
}

// 127.0.0.1 and 169.254.169.254 in each form.
const LOOPBACK_FORMS = [
  '::127.0.0.1',
  '::7f00:1', // IPv4-compatible: ::127.0.0.1 is ::7f00:1, not ::ffff:7f00:1
  '::ffff:127.0.0.1',
  '::ffff:7f00:1', // IPv4-mapped
  '::ffff:0:127.0.0.1', // SIIT
  '64:ff9b::127.0.0.1',
  '64:ff9b::7f00:1', // NAT64
  '64:ff9b:1::7f00:1',
  '64:ff9b:1:7f00:0:100::', // NAT64 local use, /96 and /48 positions
  '2002:7f00:1::',
  '2002:7f00:1:1234::5', // 6to4
  '2001:0:4136:e378:8000:63bf:80ff:fffe', // Teredo, client 127.0.0.1 (inverted)
]
const METADATA_FORMS = ['::169.254.169.254', '::a9fe:a9fe', '::ffff:0:a9fe:a9fe', '64:ff9b::a9fe:a9fe', '2002:a9fe:a9fe::1', '2001:0:4136:e378:8000:63bf:5601:5601']

t.test('the address reached: canonical, and the IPv4 address carried', async (t) => {
  t.equal(parseIp('::127.0.0.1')!.toString(), '::7f00:1', 'IPv4-compatible, as the system reads it')
  t.equal(parseIp('[::1]')!.toString(), '::1')
  t.equal(parseIp('fe80::1%eth0')!.toString(), 'fe80::1')
  t.equal(parseIp('127.1'), null, 'a short form is a name to the resolver, not an address')
  t.equal(parseIp('0x7f.0.0.1'), null)
  for (const form of LOOPBACK_FORMS)
    t.same(
      reachedAddresses(parseIp(form)!)
        .map(String)
        .filter((a) => a === '127.0.0.1'),
      ['127.0.0.1'],
      form,
    )
  t.same(reachedAddresses(parseIp('::1')!).map(String), ['::1'], '::1 is IPv6 loopback itself')
  t.same(reachedAddresses(parseIp('2001:db8::1')!).map(String), ['2001:db8::1'], 'an ordinary IPv6 address is itself')
  t.same(reachedAddresses(parseIp('64:ff9b:1::a00:1')!).map(String), ['10.0.0.1'], 'a local-use NAT64 address with a non-zero tail is the /96 form only')
})

t.test('alarm destinations: each form is judged as the IPv4 address it carries', async (t) => {
  for (const form of LOOPBACK_FORMS) t.equal(verdict(form), 'loopback', form)
  for (const form of METADATA_FORMS) t.equal(verdict(form), 'metadata', form)
  for (const form of METADATA_FORMS) t.equal(verdict(form, allowList(['0.0.0.0/0', '::/0'])), 'metadata', `${form}, whatever the allow-list`)
  t.equal(verdict('::2'), 'special', '::2 carries 0.0.0.2')
  t.equal(verdict('2002:e000:1::'), 'special', '6to4 of a multicast address')
  t.equal(verdict('::7f00:1', allowList(['127.0.0.1'])), 'allowed', 'an allowed IPv4 address is allowed in any form')
  t.equal(verdict('::1'), 'loopback')
  t.equal(verdict('2002:808:808::1'), 'allowed', '6to4 of a public address')
  t.equal(verdict('2001:db8::1'), 'allowed')
  try {
    checkAddress('::127.0.0.1', '::127.0.0.1', allowList([]))
  } catch (err) {
    t.match((err as Error).message, /^the address 127\.0\.0\.1 \(carried by ::7f00:1\) is a loopback address/)
  }
})

t.test('agentless connections: the same forms of link-local and metadata addresses are refused', async (t) => {
  for (const form of METADATA_FORMS) t.match(addressProblem(form), /link-local|metadata/, form)
  t.match(addressProblem('2002:e000:1::'), /multicast/)
  t.match(addressProblem('::ffff:0.0.0.0'), /unspecified/)
  t.match(addressProblem('100.100.100.200'), /metadata/)
  t.equal(addressProblem('2002:a00:1::'), null, 'a private network behind 6to4 is a host like any other')
  t.equal(addressProblem('10.0.0.1'), null)
  t.equal(addressProblem('fd00::1'), null)
  t.match(addressProblem('::ffff:0x7f.0.0.1'), /not a valid IPv6 address/)
})

t.test('private addresses: allowed by default; with PRIME_ALARM_DENY_PRIVATE only through the allow-list', async (t) => {
  const PRIVATE = ['10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '100.64.0.1', '100.127.255.255', 'fc00::1', 'fd12:3456::1', '::ffff:10.0.0.1', '2002:a00:1::', '::c0a8:101']
  for (const a of PRIVATE) t.equal(verdict(a), 'allowed', `${a} by default`)
  const deny = allowList([], true)
  for (const a of PRIVATE) t.equal(verdict(a, deny), 'private', `${a} denied`)
  for (const a of ['8.8.8.8', '172.32.0.1', '100.128.0.1', '2001:db8::1', '11.0.0.1']) t.equal(verdict(a, deny), 'allowed', `${a} is not private`)
  const siem = allowList(['10.20.0.0/16', 'siem.corp.example', 'fd00:5::/32'], true)
  t.equal(verdict('10.20.3.4', siem), 'allowed', 'in a listed range')
  t.equal(verdict('10.21.3.4', siem), 'private', 'outside it')
  t.equal(verdict('10.99.0.1', siem, 'SIEM.corp.example.'), 'allowed', 'a listed name')
  t.equal(verdict('fd00:5::9', siem), 'allowed')
  t.equal(verdict('127.0.0.1', siem), 'loopback', 'loopback keeps its own rule')
})

t.test('through the API: webhook URLs and syslog hosts in carried forms, and the private policy', async (t) => {
  const app = await build(t, { PRIME_ALARM_DENY_PRIVATE: 'true', PRIME_ALARM_ALLOWED_HOSTS: '10.20.0.0/16' })
  const token = await login(app)
  const save = (payload: object) => call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload })
  const webhook = (name: string, url: string) => save({ name, type: 'webhook', webhook: { url, secret: 'whsec-carried-0123456789' } })
  const syslog = (name: string, host: string) => save({ name, type: 'syslog', syslog: { host } })
  for (const [i, form] of ['::127.0.0.1', '::7f00:1', '2002:7f00:1::', '64:ff9b::7f00:1', '2002:a9fe:a9fe::'].entries()) {
    const w = await webhook(`w${i}`, `http://[${form}]:8080/hook`)
    t.equal(w.statusCode, 400, `webhook http://[${form}]/`)
    t.match(w.json().errors, [{ name: 'webhook/url' }])
    const s = await syslog(`s${i}`, form)
    t.equal(s.statusCode, 400, `syslog ${form}`)
    t.match(s.json().errors, [{ name: 'syslog/host' }])
  }
  const refused = await webhook('private', 'http://10.1.2.3/hook')
  t.equal(refused.statusCode, 400)
  t.match(refused.json(), { detail: /10\.1\.2\.3 is a private address .*PRIME_ALARM_DENY_PRIVATE/, errors: [{ name: 'webhook/url', reason: 'private address not in PRIME_ALARM_ALLOWED_HOSTS' }] })
  t.equal((await syslog('carried-private', '::ffff:192.168.0.9')).statusCode, 400)
  t.equal((await webhook('listed', 'http://10.20.0.5/hook')).statusCode, 200, 'a listed private range')
  t.equal((await syslog('public', '2001:db8::5')).statusCode, 200)
})
