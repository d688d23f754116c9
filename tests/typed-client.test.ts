// The typed-client example of docs/api.md, run as it is against a listening server: a contract
// change that breaks the example fails here (and in the type check) before a consumer's build.
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { projectRoot } from '../lib/paths.js'
import { createPrimeClient, PrimeProblemError } from '../client/index.js'
import { allAgents, arm, connect, pollEvents } from '../examples/typed-client.js'
import { ADMIN_PASSWORD, build, login } from './helpers.js'
import { checkIn, enroll, gatewayEnv, hostState, mouse, stick } from './fixtures/gateway.js'

async function listening(t: Parameters<typeof build>[0]) {
  const app = await build(t, gatewayEnv)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  return { app, baseUrl: `http://127.0.0.1:${port}` }
}

t.test('the example pages agents, follows the events feed and reads a problem', async (t) => {
  const { app, baseUrl } = await listening(t)
  const hosts = ['WS-ALPHA', 'WS-BRAVO', 'WS-CHARLIE', 'WS-DELTA', 'WS-ECHO']
  for (const host of hosts) {
    const agent = await enroll(app, undefined, host)
    const res = await checkIn(app, agent.credential, hostState([mouse, stick], { hostIdentifier: host }))
    t.equal(res.statusCode, 200, res.body)
  }

  const prime = connect(baseUrl, 'admin', ADMIN_PASSWORD)
  const seen: string[] = []
  for await (const agent of allAgents(prime, 2)) seen.push(agent.hostIdentifier ?? '')
  t.same(seen, hosts, 'every agent once, in pages of two')

  const events: number[] = []
  let next = 1
  for (;;) {
    const from = next
    next = await pollEvents(prime, from, (e) => events.push(e.eventID))
    if (next === from) break
  }
  t.ok(events.length >= hosts.length, `events read: ${events.length}`)
  t.same(
    events,
    [...events].sort((a, b) => a - b),
    'in order',
  )
  t.equal(new Set(events).size, events.length, 'none twice')
  const more = await enroll(app, undefined, 'WS-FOXTROT')
  await checkIn(app, more.credential, hostState([mouse], { hostIdentifier: 'WS-FOXTROT' }))
  const later: number[] = []
  next = await pollEvents(prime, next, (e) => later.push(e.eventID))
  t.ok(later.length > 0 && later[0] > events[events.length - 1], 'the next poll has only the new events')

  const problem = await arm(prime, 'NO-SUCH-HOST')
  t.equal(typeof problem, 'object')
  if (typeof problem === 'object') {
    t.equal(problem.status, 400)
    t.match(problem.detail, /not found/)
    t.ok(problem.requestId)
  }
  t.match(await arm(prime, 'WS-ALPHA'), /^[0-9a-f-]{36}$/, 'an agent that exists is armed: its uuid')
})

t.test('the client logs in again after a 401, and takes an integration token', async (t) => {
  const { app, baseUrl } = await listening(t)
  const calls: { url: string; auth: string | null; status: number }[] = []
  const recording: typeof fetch = async (input, init) => {
    const request = new Request(input, init)
    const response = await fetch(request)
    calls.push({ url: new URL(request.url).pathname, auth: request.headers.get('authorization'), status: response.status })
    return response
  }
  const prime = createPrimeClient({ baseUrl, login: { username: 'admin', password: ADMIN_PASSWORD }, fetch: recording })
  t.equal((await prime.GET('/prime/webui/admin/getuserdetails')).response.status, 200)
  t.equal((await prime.GET('/prime/webui/admin/getuserdetails')).response.status, 200)
  t.same(
    calls.map((c) => c.url),
    ['/prime/webui/Auth/LocalLogin', '/prime/webui/admin/getuserdetails', '/prime/webui/admin/getuserdetails'],
    'logged in once',
  )
  // The session ends behind the client's back: refused once, then logged in again.
  const ended = await app.inject({ method: 'POST', url: '/prime/webui/auth/logout', headers: { authorization: calls[1].auth! } })
  t.equal(ended.statusCode, 200, ended.body)
  calls.length = 0
  const again = await prime.POST('/prime/webui/admin/adduser', {
    body: { userName: 'maria', email: 'maria@example.com', userProfile: 20, password: 'Manager-pass-2024' },
  })
  t.equal(again.response.status, 200, 'the retried request carried its body')
  t.same(
    calls.map((c) => `${c.url} ${c.status}`),
    ['/prime/webui/admin/adduser 401', '/prime/webui/Auth/LocalLogin 200', '/prime/webui/admin/adduser 200'],
  )

  const issued = await app.inject({
    method: 'POST',
    url: '/prime/webui/admin/integrationTokens',
    headers: { authorization: `Bearer ${await login(app)}` },
    payload: { name: 'siem', userProfile: 10 },
  })
  t.equal(issued.statusCode, 200, issued.body)
  const siem = createPrimeClient({ baseUrl, token: issued.json().token })
  const feed = await siem.GET('/prime/webui/Events/GetEventsIntegration', { params: { query: { FromEventId: 1, PageSize: 10 } } })
  t.equal(feed.response.status, 200)

  const wrong = createPrimeClient({ baseUrl, login: { username: 'admin', password: 'not-the-password-1' } })
  await t.rejects(wrong.GET('/prime/webui/admin/getuserdetails'), PrimeProblemError, 'a refused login throws its problem')
  t.throws(() => createPrimeClient({ baseUrl }), /a token or a login/)
})

t.test('docs/api.md shows the example as it is in examples/typed-client.ts', async (t) => {
  const page = fs.readFileSync(path.join(projectRoot, 'docs', 'api.md'), 'utf8')
  const example = fs.readFileSync(path.join(projectRoot, 'examples', 'typed-client.ts'), 'utf8')
  const shown = example.replace("from '../client/index.js'", "from 'prime-webui/client'")
  t.ok(page.includes('```ts\n' + shown + '```'), 'docs/api.md has examples/typed-client.ts (importing prime-webui/client) in a ts block')
})

t.test("types generated from a running server's contract are the committed ones", async (t) => {
  const { baseUrl } = await listening(t)
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'prime-types-')), 'openapi.ts')
  t.teardown(() => fs.rmSync(path.dirname(out), { recursive: true, force: true }))
  // Asynchronous: the server answering the download runs in this process.
  await promisify(execFile)(path.join(projectRoot, 'node_modules', '.bin', 'openapi-typescript'), [`${baseUrl}/prime/webui/docs/json`, '-o', out], { cwd: projectRoot })
  t.equal(fs.readFileSync(out, 'utf8'), fs.readFileSync(path.join(projectRoot, 'generated', 'openapi.ts'), 'utf8'), 'npm run generate -- --from <server> gives generated/openapi.ts')
})
