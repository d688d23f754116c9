// An open notification stream ends as soon as its credential is revoked: at once when this
// process writes the revocation (logout, the account deleted, disabled or its password
// reset, the integration token revoked: the revoking request is answered after the stream
// is closed, on both backends), and when another process on the same database writes it:
// on SQLite at the hub's next look (the file's data_version moved), on PostgreSQL at the
// next periodic check (docs/operating.md "Several nodes": at most 5 s). The periodic check
// is pushed out of reach where it is not the subject, so that only the revoking write can
// end a stream within the test.
import { spawnSync } from 'node:child_process'
import http from 'node:http'
import t from 'tap'
import Database from 'better-sqlite3'
import { build, login, call, testBackend, userWithProfile, USER_PASSWORD } from './helpers.js'
import { queryValue } from './seed.js'
import { STREAM_LIMITS } from '../lib/notifications/stream.js'

const STREAM = '/prime/webui/systemNotification/stream'
const saved = { ...STREAM_LIMITS }
STREAM_LIMITS.revalidateMs = 600_000
t.teardown(() => Object.assign(STREAM_LIMITS, saved))

/** An open stream: its text so far, and whether the server ended it. */
function open(port: number, token: string): Promise<{ text: () => string; ended: Promise<string>; close: () => void }> {
  return new Promise((resolve, reject) => {
    let text = ''
    const req = http.get({ host: '127.0.0.1', port, path: STREAM, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`))
      res.setEncoding('utf8')
      const ended = new Promise<string>((done) => res.on('end', () => done(text)))
      res.on('data', (chunk: string) => {
        text += chunk
        if (text.includes('event: counts')) resolve({ text: () => text, ended, close: () => req.destroy() })
      })
    })
    req.on('error', reject)
  })
}

async function setup(t: Parameters<typeof build>[0], pollMs: number) {
  STREAM_LIMITS.pollMs = pollMs
  const app = await build(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const port = (app.server.address() as { port: number }).port
  const admin = await login(app)
  const streams: { close: () => void }[] = []
  t.teardown(() => streams.forEach((s) => s.close()))
  const subscribe = async (token: string) => {
    const s = await open(port, token)
    streams.push(s)
    return s
  }
  return { app, admin, subscribe }
}

/** What `promise` gives, or a failure after `ms` (a stream left open). */
const within = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`the stream was still open after ${ms} ms`)), ms).unref())])

const REVOKED = 'event: reauthenticate\ndata: {"reason":"token-revoked"}\n\n'

t.test('a revocation written by this process ends the stream at once', async (t) => {
  // The hub's timers are out of reach too: only the revoking write itself can end a stream.
  const { app, admin, subscribe } = await setup(t, 600_000)
  const hub = app.notifications.hub
  const cases: { name: string; token: () => Promise<string>; revoke: (token: string) => Promise<unknown> }[] = [
    { name: 'logout', token: () => login(app), revoke: (token) => call(app, token, { method: 'POST', url: '/prime/webui/auth/logout' }) },
    {
      name: 'the account deleted',
      token: () => userWithProfile(app, admin, 'gone', 10),
      revoke: () => call(app, admin, { method: 'POST', url: '/prime/webui/admin/deleteUsers', payload: ['gone'] }),
    },
    {
      name: 'the account disabled',
      token: () => userWithProfile(app, admin, 'paused', 10),
      revoke: () => call(app, admin, { method: 'POST', url: '/prime/webui/admin/updateuser', payload: { userName: 'paused', isActive: false } }),
    },
    {
      name: 'the password reset',
      token: async () => {
        await userWithProfile(app, admin, 'rosa', 10)
        return login(app, 'rosa', USER_PASSWORD)
      },
      revoke: () => call(app, admin, { method: 'POST', url: '/prime/webui/admin/updateuser', payload: { userName: 'rosa', password: 'Reset-by-admin-88' } }),
    },
    {
      name: 'the integration token revoked',
      token: async () => (await call(app, admin, { method: 'POST', url: '/prime/webui/admin/integrationTokens', payload: { name: 'siem', userProfile: 10 } })).json().token,
      revoke: async () => {
        const id = await queryValue(app, `SELECT id FROM integration_tokens WHERE name = 'siem'`)
        return call(app, admin, { method: 'DELETE', url: `/prime/webui/admin/integrationTokens/${id}` })
      },
    },
  ]
  for (const c of cases) {
    const token = await c.token()
    const s = await subscribe(token)
    const open = hub.subscribers
    const res = (await c.revoke(token)) as { statusCode: number; body: string }
    t.equal(res.statusCode, 200, `${c.name}: ${res.body}`)
    t.equal(hub.subscribers, open - 1, `${c.name}: the stream is closed by the time the revoking request is answered`)
    t.ok((await within(s.ended, 3000)).endsWith(REVOKED), `${c.name}: the stream says why, then ends`)
  }
  const still = await subscribe(admin)
  await call(app, admin, { method: 'POST', url: '/prime/webui/admin/updateuser', payload: { userName: 'admin', email: 'root@example.com' } })
  t.equal(hub.subscribers, 1, 'a change that revokes nothing leaves the other streams open')
  t.notMatch(still.text(), /reauthenticate/)
})

t.test('a revocation written by another process ends the stream at the next look', { skip: testBackend === 'postgres' && 'SQLite: the hub sees the file change' }, async (t) => {
  const { app, subscribe } = await setup(t, 250)
  const token = await login(app)
  const s = await subscribe(token)
  const other = new Database(app.testConfig.dbFile)
  t.teardown(() => other.close())
  const session = (await app.tokens.authenticate(token, Date.now())).sessionId!
  const wrote = Date.now()
  other.prepare("UPDATE sessions SET revoked_ms = ?, revoked_reason = 'revoked elsewhere' WHERE id = ?").run(wrote, session)
  const text = await within(s.ended, 3000)
  t.ok(text.endsWith(REVOKED), 'the stream says why, then ends')
  t.ok(Date.now() - wrote < 3000, `ended ${Date.now() - wrote} ms after the write (the periodic check is 10 minutes away)`)
})

t.test(
  'a revocation written by another process on the same PostgreSQL database ends the stream within the periodic check',
  { skip: testBackend !== 'postgres' && 'PostgreSQL: another node on the database' },
  async (t) => {
    // The check every node makes of its streams' credentials, at its documented period.
    STREAM_LIMITS.revalidateMs = saved.revalidateMs
    t.teardown(() => {
      STREAM_LIMITS.revalidateMs = 600_000
    })
    const { app, subscribe } = await setup(t, 250)
    const token = await login(app)
    const s = await subscribe(token)
    const session = (await app.tokens.authenticate(token, Date.now())).sessionId!
    // Another process on the app's database, with a connection of its own (as another node's).
    const script = `const pg = require('pg')
const c = new pg.Client({ connectionString: process.argv[1] })
c.connect()
  .then(() => c.query("UPDATE sessions SET revoked_ms = $1, revoked_reason = 'revoked elsewhere' WHERE id = $2", [Date.now(), process.argv[2]]))
  .then((r) => { process.stdout.write(String(r.rowCount)); return c.end() })`
    const wrote = Date.now()
    const other = spawnSync(process.execPath, ['-e', script, app.testConfig.databaseUrl!, session], { encoding: 'utf8', timeout: 30_000 })
    t.equal(other.stdout, '1', `the other process revoked the session: ${other.stderr}`)
    const bound = saved.revalidateMs + 3000
    const text = await within(s.ended, bound)
    t.ok(text.endsWith(REVOKED), 'the stream says why, then ends')
    t.ok(Date.now() - wrote < bound, `ended ${Date.now() - wrote} ms after the write (the periodic check is every ${saved.revalidateMs} ms)`)
  },
)
