// Pins how the log treats agents' routine traffic: check-ins that succeed with nothing
// changed and nothing to hand out are counted into one summary line a minute; every other
// request (changes, commands, errors, refusals) keeps its own line.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { LineBatcher } from '../lib/log.js'
import { ADMIN_PASSWORD, testDatabaseEnv } from './helpers.js'
import { checkIn, enroll, gatewayEnv, hostState, mouse } from './fixtures/gateway.js'

async function logged(t: Parameters<Parameters<typeof t.test>[1]>[0], env: Record<string, string> = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-test-'))
  const blocks: string[] = []
  const lines = new LineBatcher({ write: (s: string) => blocks.push(s), flushSync() {} }, 1 << 20, 60_000)
  const app = await buildApp({
    config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'info', ...(await testDatabaseEnv(t)), ...gatewayEnv, ...env }),
    logStream: lines,
  })
  t.teardown(() => {
    lines.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const read = () => {
    lines.flush()
    return blocks
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
  }
  return { app, read }
}

t.test('unchanged check-ins make one summary line; changes and refusals keep theirs', async (t) => {
  const { app, read } = await logged(t)
  const a = await enroll(app, 'machine-a')
  const b = await enroll(app, 'machine-b', 'HOST-B')
  const body = hostState([mouse])
  for (let i = 0; i < 5; i++) {
    t.equal((await checkIn(app, a.credential, body)).statusCode, 200)
    t.equal((await checkIn(app, b.credential, body)).statusCode, 200)
  }
  t.equal((await checkIn(app, b.credential, hostState([]))).statusCode, 200, 'a change')
  t.equal((await checkIn(app, 'pag_' + 'x'.repeat(43), body)).statusCode, 401, 'a refusal')
  const requests = read().filter((l) => l.msg === 'request')
  t.same(
    requests.map((l) => [l.url, l.statusCode]),
    [
      ['/prime/webui/gateway/enroll', 200],
      ['/prime/webui/gateway/enroll', 200],
      ['/prime/webui/gateway/checkin', 200],
      ['/prime/webui/gateway/checkin', 200],
      ['/prime/webui/gateway/checkin', 200],
      ['/prime/webui/gateway/checkin', 401],
    ],
    'enrollments, the first check-in of each agent, the change and the refusal',
  )
  await app.close()
  const summary = read().filter((l) => l.msg === 'routine agent check-ins')
  t.equal(summary.length, 1, 'one summary, written at the latest when the server closes')
  t.match(summary[0], { level: 30, routine: { operation: 'agentCheckIn', unchanged: 8, agents: 2, avgMs: Number, maxMs: Number } })
})

t.test('PRIME_LOG_ROUTINE_SECONDS=0 logs every check-in', async (t) => {
  const { app, read } = await logged(t, { PRIME_LOG_ROUTINE_SECONDS: '0' })
  const a = await enroll(app, 'machine-a')
  for (let i = 0; i < 3; i++) await checkIn(app, a.credential, hostState([mouse]))
  await app.close()
  t.equal(read().filter((l) => l.url === '/prime/webui/gateway/checkin').length, 3)
})

t.test("a routine check-in whose x-request-id was not taken keeps its line, naming the caller's id", async (t) => {
  const { app, read } = await logged(t)
  const a = await enroll(app, 'machine-a')
  const body = hostState([mouse])
  await checkIn(app, a.credential, body)
  await checkIn(app, a.credential, body)
  const res = await app.inject({ method: 'POST', url: '/prime/webui/gateway/checkin', headers: { authorization: `Bearer ${a.credential}`, 'x-request-id': 'agent-chosen-id-0001' }, payload: body })
  t.equal(res.statusCode, 200)
  const lines = read().filter((l) => l.url === '/prime/webui/gateway/checkin')
  t.equal(lines.length, 2, 'the first check-in and the one with its own id; the routine one is counted')
  t.match(lines[1], { reqId: res.headers['x-request-id'], clientRequestId: 'agent-chosen-id-0001' })
  await app.close()
})
