// Managing alarm destinations: create, list, update, remove; defaults, validation, masked
// secrets, unique names, the limit, per-item results, profiles and audit records.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login, userWithProfile } from './helpers.js'
import { latestAudit, portsOf, query, queryOne, recordEvents } from './seed.js'
import { ALARM_PATH, alarmEnv, httpReceiver } from './fixtures/receivers.js'
import { alarmWorker } from '../lib/alarms/index.js'

const SECRET = 'whsec-0123456789abcdef'
const HEADER_VALUE = 'Bearer soar-ingest-token-42'

// E-mail destinations need outgoing mail configured; nothing is sent in these tests.
const MAIL = { PRIME_SMTP_URL: 'smtp://127.0.0.1:9' }

async function setup(t: Parameters<typeof build>[0], env: Record<string, string> = alarmEnv) {
  const app = await build(t, { ...MAIL, ...env })
  const token = await login(app)
  return { app, token }
}

const add = (app: FastifyInstance, token: string, payload: unknown) => call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload: payload as object })
const list = async (app: FastifyInstance, token: string) => {
  const res = await call(app, token, { method: 'GET', url: `${ALARM_PATH}/GetAlarmDests` })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res
}
const remove = (app: FastifyInstance, token: string, payload: unknown) => call(app, token, { method: 'POST', url: `${ALARM_PATH}/RemoveAlarmDest`, payload: payload as object })
const webhook = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  type: 'webhook',
  webhook: { url: 'http://127.0.0.1:9/hooks/prime', secret: SECRET, headers: { Authorization: HEADER_VALUE } },
  ...extra,
})
const storedSettings = async (app: FastifyInstance, id: string) => JSON.parse((await portsOf(app).alarmDestinations.byId(id))!.settings)

t.test('create each type: defaults filled, secrets never answered', async (t) => {
  const { app, token } = await setup(t)
  const hook = await add(app, token, webhook('soc-webhook'))
  t.equal(hook.statusCode, 200, hook.body)
  const h = hook.json()
  t.match(h, {
    id: /^[0-9a-f-]{36}$/,
    name: 'soc-webhook',
    type: 'webhook',
    enabled: true,
    filters: { minimumSeverity: 'Warning', categories: [], auditCategories: [], feeds: ['events'] },
    syslog: null,
    email: null,
    webhook: { url: 'http://127.0.0.1:9/hooks/prime', hasSecret: true, headers: { Authorization: '***' } },
    createdBy: 'admin',
    updatedBy: 'admin',
    delivery: { pending: 0, lastAttemptTime: null, lastStatus: null, lastError: null, lastDeliveredTime: null, failedLast24h: 0 },
  })
  t.notOk('secret' in h.webhook)
  t.notMatch(hook.body, SECRET)
  t.notMatch(hook.body, HEADER_VALUE)
  t.same(await storedSettings(app, h.id), { url: 'http://127.0.0.1:9/hooks/prime', secret: SECRET, headers: { Authorization: HEADER_VALUE } }, 'stored as sent')

  // Property names in any case, as clients send them.
  const sys = await add(app, token, { Name: 'SIEM syslog', Type: 'syslog', Syslog: { Host: '127.0.0.1' }, Filters: { MinimumSeverity: 'Informational', Feeds: ['audit', 'events'] } })
  t.equal(sys.statusCode, 200, sys.body)
  t.match(sys.json(), {
    type: 'syslog',
    syslog: { host: '127.0.0.1', port: 514, transport: 'udp', format: 'rfc5424', facility: 'local0' },
    webhook: null,
    filters: { minimumSeverity: 'Informational', feeds: ['events', 'audit'] },
  })
  const mail = await add(app, token, { name: 'on-call', type: 'email', enabled: false, email: { recipients: ['soc@example.com', 'oncall@example.org'] }, filters: { categories: ['USB', 'Host'] } })
  t.equal(mail.statusCode, 200, mail.body)
  t.match(mail.json(), { enabled: false, email: { recipients: ['soc@example.com', 'oncall@example.org'], subjectPrefix: '[Prime]' }, filters: { categories: ['USB', 'Host'] } })

  const all = await list(app, token)
  t.notMatch(all.body, SECRET)
  t.notMatch(all.body, HEADER_VALUE)
  const body = all.json()
  t.equal(body.recordsTotal, 3)
  t.equal(body.recordsFiltered, 3)
  t.same(
    body.data.map((d: any) => d.name),
    ['on-call', 'SIEM syslog', 'soc-webhook'],
    'ordered by name, case-insensitively',
  )
  t.same(body.data[2], h, 'listed as answered when saved')

  // A plain User may read destinations but not change them.
  const userToken = await userWithProfile(app, token, 'reader', 10)
  t.equal((await list(app, userToken)).statusCode, 200)
  t.equal((await add(app, userToken, webhook('by-user'))).statusCode, 403)
  const managerToken = await userWithProfile(app, token, 'manager', 20)
  const byManager = await add(app, managerToken, webhook('by-manager'))
  t.equal(byManager.statusCode, 200)
  t.equal(byManager.json().createdBy, 'manager')
})

t.test('update: replaces settings, keeps the stored secret and masked header values', async (t) => {
  const { app, token } = await setup(t)
  const created = (await add(app, token, webhook('hook', { webhook: { url: 'http://127.0.0.1:9/a', secret: SECRET, headers: { Authorization: HEADER_VALUE, 'X-Tenant': 'acme' } } }))).json()

  // Sending back what GetAlarmDests answered changes nothing secret.
  const answered = (await list(app, token)).json().data[0]
  const again = await add(app, token, { ...answered, enabled: false })
  t.equal(again.statusCode, 200, again.body)
  t.equal(again.json().enabled, false)
  t.equal(again.json().createdTime, created.createdTime)
  t.same(await storedSettings(app, created.id), { url: 'http://127.0.0.1:9/a', secret: SECRET, headers: { Authorization: HEADER_VALUE, 'X-Tenant': 'acme' } })

  // A new secret replaces the old; headers replace the set; `***` keeps one value.
  const changed = await add(app, token, {
    id: created.id,
    name: 'hook',
    type: 'webhook',
    webhook: { url: 'http://127.0.0.1:9/b', secret: 'another-secret-0123456789', headers: { authorization: '***', 'X-Other': 'v' } },
  })
  t.equal(changed.statusCode, 200, changed.body)
  t.same(changed.json().webhook, { url: 'http://127.0.0.1:9/b', hasSecret: true, headers: { authorization: '***', 'X-Other': '***' }, batch: { maxEvents: 1, maxBytes: 1048576 } })
  t.same(await storedSettings(app, created.id), { url: 'http://127.0.0.1:9/b', secret: 'another-secret-0123456789', headers: { authorization: HEADER_VALUE, 'X-Other': 'v' } })
  t.equal(changed.json().enabled, true, 'enabled defaults to true when left out')

  // The audit records say what changed, secrets masked.
  const records = (await latestAudit(app, 50)).filter((r) => r.operation_id === 'addOrUpdateAlarmDest')
  t.equal(records[0].description, 'Alarm destination "hook" updated')
  t.same(JSON.parse(records[0].details), { enabled: true, webhook: { url: 'http://127.0.0.1:9/b', secret: '***', headers: { authorization: '***', 'X-Other': '***' } } })
  t.match(records[0], { category: 'AlarmDestinations', asset_type: 'AlarmDestination', asset_detail: 'WebhookDestination', asset_key: created.id, asset_name: 'hook', outcome: 'Succeeded' })
  t.same(JSON.parse(records[1].details), { enabled: false })
  t.equal(records[2].description, 'Alarm destination "hook" created')
  for (const r of records) {
    t.notMatch(r.details, SECRET)
    t.notMatch(r.details, HEADER_VALUE)
    t.notMatch(r.details, 'another-secret')
  }

  // Changing the type drops the webhook settings; going back needs a secret again.
  const toSyslog = await add(app, token, { id: created.id, name: 'hook', type: 'syslog', syslog: { host: '127.0.0.1', port: 6514, transport: 'tcp', format: 'cef', facility: 'auth' } })
  t.equal(toSyslog.statusCode, 200, toSyslog.body)
  t.match(toSyslog.json(), { type: 'syslog', webhook: null, syslog: { host: '127.0.0.1', port: 6514, transport: 'tcp', format: 'cef', facility: 'auth' } })
  const back = await add(app, token, { id: created.id, name: 'hook', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/c' } })
  t.equal(back.statusCode, 400)
  t.match(back.json().errors, [{ name: 'webhook/secret', reason: /no stored secret/ }])

  // Unknown id: 404, nothing created.
  const unknown = await add(app, token, { ...webhook('ghost'), id: '11111111-2222-4333-8444-555555555555' })
  t.equal(unknown.statusCode, 404)
  t.equal((await list(app, token)).json().recordsTotal, 1)
})

t.test('names are unique case-insensitively (409)', async (t) => {
  const { app, token } = await setup(t)
  const first = (await add(app, token, webhook('SOC-Hook'))).json()
  const dup = await add(app, token, webhook('soc-hook'))
  t.equal(dup.statusCode, 409)
  t.match(dup.json(), { status: 409, detail: /"SOC-Hook" already exists/ })
  t.equal((await add(app, token, webhook('Ärger'))).statusCode, 200)
  t.equal((await add(app, token, webhook('ärger'))).statusCode, 409, 'beyond ASCII too')
  const other = (await add(app, token, webhook('other'))).json()
  t.equal((await add(app, token, { ...webhook('soc-HOOK'), id: other.id })).statusCode, 409, 'renaming onto another name')
  const renamed = await add(app, token, { ...webhook('soc-hook'), id: first.id })
  t.equal(renamed.statusCode, 200, 'a destination may change the case of its own name')
  t.equal(renamed.json().name, 'soc-hook')
})

t.test('at most 100 destinations', async (t) => {
  const { app, token } = await setup(t)
  for (let i = 0; i < 100; i++) {
    const r = await add(app, token, { name: `mail-${i}`, type: 'email', email: { recipients: [`r${i}@example.com`] } })
    if (r.statusCode !== 200) t.fail(r.body)
  }
  const over = await add(app, token, { name: 'mail-100', type: 'email', email: { recipients: ['x@example.com'] } })
  t.equal(over.statusCode, 409)
  t.match(over.json().detail, /100 alarm destinations/)
  const page = (await list(app, token)).json()
  t.equal(page.recordsTotal, 100)
  t.equal(page.data.length, 100)
  // Updating one is still possible at the limit.
  t.equal((await add(app, token, { id: page.data[0].id, name: page.data[0].name, type: 'email', email: { recipients: ['new@example.com'] } })).statusCode, 200)
})

t.test('invalid settings answer 400 naming the field', async (t) => {
  const { app, token } = await setup(t)
  const cases: [string, unknown, RegExp | string][] = [
    ['settings of the type missing', { name: 'a', type: 'webhook' }, 'webhook'],
    ['settings of the type null', { name: 'a', type: 'email', email: null }, 'email'],
    ['another type settings', { name: 'a', type: 'syslog', syslog: { host: '127.0.0.1' }, webhook: { url: 'http://127.0.0.1/' } }, 'webhook'],
    ['no secret when creating', { name: 'a', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/' } }, 'webhook/secret'],
    ['secret too short', { name: 'a', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: 'short' } }, 'webhook/secret'],
    ['not http', { name: 'a', type: 'webhook', webhook: { url: 'ftp://127.0.0.1/x', secret: SECRET } }, 'webhook/url'],
    ['user and password in the URL', { name: 'a', type: 'webhook', webhook: { url: 'http://bob:pw@127.0.0.1:9/', secret: SECRET } }, 'webhook/url'],
    ['reserved header', { name: 'a', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET, headers: { 'content-type': 'text/plain' } } }, 'webhook/headers/content-type'],
    ['reserved Host header', { name: 'a', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET, headers: { Host: 'evil' } } }, 'webhook/headers/Host'],
    ['reserved X-Prime header', { name: 'a', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET, headers: { 'X-Prime-Signature': 'x' } } }, 'webhook/headers/X-Prime-Signature'],
    ['header value with a line break', { name: 'a', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET, headers: { 'X-A': 'v\r\nX-Injected: 1' } } }, 'webhook/headers/X-A'],
    ['header value beyond Latin-1', { name: 'a', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET, headers: { 'X-A': 'caf\u2192' } } }, 'webhook/headers/X-A'],
    ['invalid header name', { name: 'a', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET, headers: { 'Bad Name': 'v' } } }, 'webhook/headers/Bad Name'],
    ['*** with nothing stored', { name: 'a', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET, headers: { Authorization: '***' } } }, 'webhook/headers/Authorization'],
    ['blank name', { name: '   ', type: 'email', email: { recipients: ['a@example.com'] } }, 'name'],
    ['control character in the name', { name: 'a\nb', type: 'email', email: { recipients: ['a@example.com'] } }, 'name'],
    ['no recipient', { name: 'a', type: 'email', email: { recipients: [] } }, 'email/recipients'],
    ['bad recipient', { name: 'a', type: 'email', email: { recipients: ['not-an-address'] } }, 'email/recipients/0'],
    ['line break in the subject prefix', { name: 'a', type: 'email', email: { recipients: ['a@example.com'], subjectPrefix: 'x\r\nBcc: y@example.com' } }, 'email/subjectPrefix'],
    ['unknown severity', { name: 'a', type: 'email', email: { recipients: ['a@example.com'] }, filters: { minimumSeverity: 'Loud' } }, 'filters/minimumSeverity'],
    ['unknown category', { name: 'a', type: 'email', email: { recipients: ['a@example.com'] }, filters: { categories: ['Disk'] } }, 'filters/categories/0'],
    ['no feed', { name: 'a', type: 'email', email: { recipients: ['a@example.com'] }, filters: { feeds: [] } }, 'filters/feeds'],
    ['syslog port out of range', { name: 'a', type: 'syslog', syslog: { host: '127.0.0.1', port: 70000 } }, 'syslog/port'],
    ['syslog host not a name', { name: 'a', type: 'syslog', syslog: { host: 'bad host!' } }, 'syslog/host'],
    ['unknown property', { name: 'a', type: 'email', email: { recipients: ['a@example.com'] }, colour: 'red' }, /colour|additional/],
  ]
  for (const [what, payload, name] of cases) {
    const res = await add(app, token, payload)
    t.equal(res.statusCode, 400, `${what}: ${res.body}`)
    const errors = res.json().errors ?? []
    t.ok(
      errors.some((e: any) => (typeof name === 'string' ? e.name === name : name.test(`${e.name} ${e.reason}`))),
      `${what} names ${name}: ${JSON.stringify(errors)}`,
    )
  }
  t.equal((await list(app, token)).json().recordsTotal, 0, 'nothing was saved')
})

t.test('the address rule applies when saving (SSRF)', async (t) => {
  const { app, token } = await setup(t, { PRIME_ALARM_ALLOWED_HOSTS: '127.0.0.1, 10.9.0.0/16' })
  const hook = (url: string) => add(app, token, { name: 'a', type: 'webhook', webhook: { url, secret: SECRET } })
  const sys = (host: string) => add(app, token, { name: 'a', type: 'syslog', syslog: { host } })
  const refusals: [string, Promise<any>, string, RegExp][] = [
    ['metadata address', hook('http://169.254.169.254/latest/meta-data/'), 'webhook/url', /link-local or cloud metadata/],
    ['metadata address in IPv6-mapped form', hook('http://[::ffff:169.254.169.254]/'), 'webhook/url', /link-local or cloud metadata/],
    ['link-local IPv6', hook('https://[fe80::1]/'), 'webhook/url', /link-local or cloud metadata/],
    ['AWS IPv6 metadata', hook('http://[fd00:ec2::254]/'), 'webhook/url', /link-local or cloud metadata/],
    ['Alibaba metadata', hook('http://100.100.100.200/'), 'webhook/url', /link-local or cloud metadata/],
    ['Azure wire server', sys('168.63.129.16'), 'syslog/host', /link-local or cloud metadata/],
    ['metadata name', hook('http://metadata.google.internal/computeMetadata/v1/'), 'webhook/url', /cloud metadata host name/],
    ['unspecified', hook('http://0.0.0.0:8080/'), 'webhook/url', /unspecified, broadcast or multicast/],
    ['multicast syslog', sys('239.1.2.3'), 'syslog/host', /unspecified, broadcast or multicast/],
    ['broadcast syslog', sys('255.255.255.255'), 'syslog/host', /unspecified, broadcast or multicast/],
    ['loopback not listed', hook('http://127.0.0.2:8080/'), 'webhook/url', /loopback/],
    ['IPv6 loopback not listed', sys('::1'), 'syslog/host', /loopback/],
    ['a name that does not resolve', hook('https://no-such-host.invalid/hook'), 'webhook/url', /does not resolve/],
    ['syslog name that does not resolve', sys('no-such-host.invalid'), 'syslog/host', /does not resolve/],
  ]
  for (const [what, pending, name, reason] of refusals) {
    const res = await pending
    t.equal(res.statusCode, 400, `${what}: ${res.body}`)
    t.match(res.json(), { type: 'urn:prime:problem:validation', errors: [{ location: 'body', name, reason }] }, what)
  }
  const metadata = await hook('http://169.254.169.254/')
  t.equal(metadata.json().detail, 'webhook/url: the address 169.254.169.254 is a link-local or cloud metadata address and is never allowed.')

  // Allowed: listed loopback (by address, and by the name that resolves to it), private ranges.
  t.equal((await add(app, token, { name: 'listed', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET } })).statusCode, 200)
  t.equal((await add(app, token, { name: 'by-name', type: 'webhook', webhook: { url: 'http://localhost:9/', secret: SECRET } })).statusCode, 200)
  t.equal((await add(app, token, { name: 'private', type: 'syslog', syslog: { host: '10.20.30.40' } })).statusCode, 200)
  t.equal((await add(app, token, { name: 'private6', type: 'webhook', webhook: { url: 'https://[fd12::1]:8443/x', secret: SECRET } })).statusCode, 200)
  t.equal((await list(app, token)).json().recordsTotal, 4)
})

t.test('without an allow-list, loopback is refused', async (t) => {
  const { app, token } = await setup(t, {})
  const res = await add(app, token, { name: 'a', type: 'webhook', webhook: { url: 'http://localhost:9/', secret: SECRET } })
  t.equal(res.statusCode, 400)
  t.match(res.json().errors, [{ name: 'webhook/url', reason: 'loopback address not in PRIME_ALARM_ALLOWED_HOSTS' }])
})

t.test('e-mail destinations need outgoing mail', async (t) => {
  const app = await build(t, alarmEnv)
  const token = await login(app)
  const res = await add(app, token, { name: 'mail', type: 'email', email: { recipients: ['soc@example.com'] } })
  t.equal(res.statusCode, 400)
  t.match(res.json().errors, [{ name: 'email', reason: /PRIME_SMTP_URL/ }])
})

t.test('remove: per-item results; pending deliveries cancelled, attempts kept', async (t) => {
  const { app, token } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  rx.respond = () => ({ status: 503 })
  const a = (await add(app, token, { name: 'a', type: 'webhook', webhook: { url: rx.url, secret: SECRET } })).json()
  const b = (await add(app, token, { name: 'b', type: 'email', enabled: false, email: { recipients: ['b@example.com'] } })).json()
  const worker = alarmWorker(app)
  worker.pause()
  await recordEvents(app, Date.now(), [
    { code: '0x110005', severity: 2, category: 'USB', entityId: 'H (10.0.0.1)', description: 'Known attack tool detected', details: 'one' },
    { code: '0x110005', severity: 2, category: 'USB', entityId: 'H (10.0.0.1)', description: 'Known attack tool detected', details: 'two' },
  ])
  await worker.turn()
  t.equal(rx.deliveries.length, 1, 'the first delivery was tried and must be retried')
  const before = (await list(app, token)).json().data.find((d: any) => d.id === a.id)
  t.match(before.delivery, { pending: 2, lastStatus: 'failed', lastError: 'The receiver refused it: HTTP 5xx.' })

  const res = await remove(app, token, [a.id.toUpperCase(), 'no-such-id', b.id, a.id])
  t.equal(res.statusCode, 200, res.body)
  t.same(res.json(), {
    succeeded: 3,
    failed: 1,
    results: [
      { id: a.id.toUpperCase(), status: 'done', reason: null, code: null },
      { id: 'no-such-id', status: 'failed', reason: 'No alarm destination with this id.', code: 'not-found' },
      { id: b.id, status: 'done', reason: null, code: null },
      { id: a.id, status: 'done', reason: null, code: null },
    ],
  })
  t.equal((await list(app, token)).json().recordsTotal, 0)
  const rows = (await query(app, 'SELECT status, attempts FROM alarm_outbox WHERE destination_id = ? ORDER BY id', a.id)) as any[]
  t.same(
    rows.map((r) => r.status),
    ['cancelled', 'cancelled'],
  )
  t.equal(((await queryOne(app, 'SELECT count(*) AS n FROM alarm_attempts WHERE destination_id = ?', a.id)) as any).n, 1, 'the attempt is kept')
  await worker.turn()
  t.equal(rx.deliveries.length, 1, 'nothing more is delivered')

  const record = (await latestAudit(app, 5)).find((r) => r.operation_id === 'removeAlarmDest')!
  t.match(record, { description: 'Alarm destinations removed: "a", "b"', outcome: 'Succeeded' })
  t.match(JSON.parse(record.details), {
    removed: [
      { id: a.id, name: 'a', cancelledDeliveries: 2 },
      { id: b.id, name: 'b' },
    ],
    failed: [{ id: 'no-such-id' }],
  })

  for (const body of [null, []]) {
    const bad = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/RemoveAlarmDest`, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) })
    t.equal(bad.statusCode, 400, `body ${JSON.stringify(body)}`)
  }
})

t.test('the same name given twice at once: one destination, the other answers 409', async (t) => {
  const { app, token } = await setup(t)
  const other = (await add(app, token, webhook('renamed-from'))).json()
  for (let round = 0; round < 6; round++) {
    const name = `race-${round}`
    // Two creations, and a rename of another destination onto the same name.
    const answers = await Promise.all([add(app, token, webhook(name)), add(app, token, webhook(name.toUpperCase())), add(app, token, { ...webhook(name), id: other.id })])
    t.same(answers.map((a) => a.statusCode).sort(), [200, 409, 409], `round ${round}: one took the name, the others were refused: ${answers.map((a) => a.body.slice(0, 120)).join(' | ')}`)
    if (answers[2].statusCode === 200) {
      // The rename took it: the next round renames it back first.
      t.equal((await add(app, token, { ...webhook(`renamed-${round}`), id: other.id })).statusCode, 200)
    }
  }
})

t.test('a change racing the removal of its destination answers 200 or 404, never 500', async (t) => {
  const { app, token } = await setup(t)
  for (let round = 0; round < 8; round++) {
    const created = (await add(app, token, webhook(`gone-${round}`))).json()
    const [changed, removed] = await Promise.all([add(app, token, { ...webhook(`gone-${round}-renamed`), id: created.id }), remove(app, token, [created.id])])
    t.equal(removed.statusCode, 200, removed.body)
    t.ok([200, 404].includes(changed.statusCode), `round ${round}: the change answered ${changed.statusCode} ${changed.body.slice(0, 160)}`)
    t.notOk(
      (await list(app, token)).json().data.some((d: { id: string }) => d.id === created.id),
      'and the destination is gone',
    )
  }
})
