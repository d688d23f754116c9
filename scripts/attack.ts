// npm run attack: an outsider's attack run, with the contract in hand, over every operation.
// Starts the built server on 127.0.0.1 in a temporary data dir, creates every credential
// kind (Administrator, Manager and User tokens, an integration token, an enrolled agent, a
// registered poller), sets up alarm destinations whose targets answer with a marker, then
// sends each operation valid and invalid requests with each credential and with none
// (scripts/attack-core.ts), and bounded floods at login, a gateway check-in and a read
// with the server's production limits. Reports the requests, every 5xx, every answer the
// contract does not declare, any answer carrying an alarm target's answer, and timings.
// Exits 1 on a finding. Loopback only; bounded (about five minutes on two cores).
import crypto from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import type { AddressInfo } from 'node:net'
import { loadSpec, operations } from '../lib/contract.js'
import { attack, contractJudge, summarize, type AttackAnswer, type AttackRequest, type CredentialKind, type Credentials, type Finding, type Sender } from './attack-core.js'
import { start, stop } from './bench-support.js'

const PASSWORD = 'Attack-password-1234'
const ENROLL = 'attack-enrollment-secret-0123456789'
const POLLER_SECRET = 'attack-poller-secret-0123456789'
const MARKER = `ATTACK-READBACK-${crypto.randomBytes(6).toString('hex')}`
const FLOOD_REQUESTS = Number(process.env.ATTACK_FLOOD_REQUESTS ?? 2000)
const FLOOD_CONCURRENCY = Number(process.env.ATTACK_FLOOD_CONCURRENCY ?? 50)
const CONCURRENCY = Number(process.env.ATTACK_CONCURRENCY ?? 4)
const ALARM_TIMEOUT_SECONDS = 2

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer()
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo
      s.close(() => resolve(port))
    })
  })

/** Real HTTP on 127.0.0.1; what Node's client refuses to write (control characters) goes out raw. */
function httpSender(port: number, agent: http.Agent, localAddress?: string): Sender {
  const send = (req: AttackRequest, fresh: boolean): Promise<AttackAnswer> =>
    new Promise<AttackAnswer>((resolve, reject) => {
      let r: http.ClientRequest
      try {
        r = http.request({ host: '127.0.0.1', port, method: req.method, path: req.url, headers: req.headers, agent: fresh ? false : agent, localAddress })
      } catch {
        return rawRequest(port, req).then(resolve, reject)
      }
      r.setTimeout(60_000, () => r.destroy(new Error('no answer within 60 s')))
      r.on('response', (res) => {
        // A notification stream does not end by itself: its head is the answer.
        if (String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
          resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type']), body: '' })
          return res.destroy()
        }
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks).toString('utf8') }))
        res.on('error', reject)
      })
      r.on('error', (err: NodeJS.ErrnoException) => {
        // A kept-alive connection the server closed meanwhile (after a 431, say): the usual
        // race of keep-alive, not the server's answer; tried again on a fresh connection.
        if (r.reusedSocket && !fresh && (err.code === 'ECONNRESET' || err.message === 'socket hang up')) send(req, true).then(resolve, reject)
        else reject(err)
      })
      r.end(req.body)
    })
  return (req) => send(req, false)
}

/** One request written byte for byte on its own connection (Connection: close), its answer read to the end. */
function rawRequest(port: number, req: AttackRequest): Promise<AttackAnswer> {
  return new Promise((resolve, reject) => {
    const body = Buffer.from(req.body ?? '', 'utf8')
    const head = [`${req.method} ${req.url} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', ...Object.entries(req.headers).map(([k, v]) => `${k}: ${v}`), `Content-Length: ${body.length}`].join(
      '\r\n',
    )
    const socket = net.connect(port, '127.0.0.1', () => socket.end(Buffer.concat([Buffer.from(head + '\r\n\r\n', 'utf8'), body])))
    const chunks: Buffer[] = []
    socket.setTimeout(60_000, () => socket.destroy(new Error('no answer within 60 s')))
    socket.on('data', (c) => chunks.push(c))
    socket.on('error', reject)
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const split = text.indexOf('\r\n\r\n')
      const headLines = text.slice(0, split < 0 ? text.length : split).split('\r\n')
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(headLines[0] ?? '')?.[1] ?? 0)
      const header = (name: string) =>
        headLines
          .find((l) => l.toLowerCase().startsWith(`${name}:`))
          ?.slice(name.length + 1)
          .trim() ?? ''
      let payload = split < 0 ? '' : text.slice(split + 4)
      if (/chunked/i.test(header('transfer-encoding'))) {
        let out = ''
        for (let at = 0; ; ) {
          const eol = payload.indexOf('\r\n', at)
          const size = parseInt(payload.slice(at, eol), 16)
          if (!size) break
          out += payload.slice(eol + 2, eol + 2 + size)
          at = eol + 2 + size + 2
        }
        payload = out
      }
      if (!status) reject(new Error(`no HTTP answer (${text.length} bytes)`))
      else resolve({ status, contentType: header('content-type'), body: payload })
    })
  })
}

/** An alarm target: answers `status` with the marker in its reason phrase, a header and the body. */
async function markerTarget(status: number): Promise<{ url: string; hits: () => number; close: () => void }> {
  let hits = 0
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      hits++
      res.writeHead(status, `Reason ${MARKER}`, { 'content-type': 'text/plain', 'x-internal': MARKER, location: `http://10.0.0.1/${MARKER}` })
      res.end(`${MARKER} internal service answer\n`.repeat(4))
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    hits: () => hits,
    close: () => {
      server.closeAllConnections()
      server.close()
    },
  }
}

/** A port that accepts connections and never answers. */
async function silentPort(): Promise<{ port: number; close: () => void }> {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((s) => {
    sockets.add(s)
    s.on('error', () => undefined)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy()
      server.close()
    },
  }
}

const pct = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] : NaN)

async function main() {
  const spec = loadSpec()
  const ops = operations(spec)
  const judge = contractJudge(spec)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-attack-'))
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  const port = await freePort()
  const base = '/prime/webui'
  const env = {
    PRIME_DATA_DIR: dir,
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'warn',
    PRIME_ADMIN_PASSWORD: PASSWORD,
    PRIME_AGENT_ENROLLMENT_SECRET: ENROLL,
    PRIME_POLLER_ENROLLMENT_SECRET: POLLER_SECRET,
    PRIME_ALARM_ALLOWED_HOSTS: '127.0.0.1',
    PRIME_ALARM_TIMEOUT_SECONDS: String(ALARM_TIMEOUT_SECONDS),
  }
  // The fuzzing phase lifts the per-address limits (every request comes from 127.0.0.1);
  // the floods then run against the production limits.
  const lifted = { PRIME_RATE_LIMIT_MAX: '100000000', PRIME_LOGIN_RATE_LIMIT_MAX: '100000', PRIME_LOCKOUT_THRESHOLD: '1000', PRIME_AGENT_MIN_CHECKIN_SECONDS: '0' }
  const findings: Finding[] = []
  const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(CONCURRENCY, FLOOD_CONCURRENCY) })
  const send = httpSender(port, agent)
  let setupRequests = 0
  const call = async (method: string, url: string, token: string | undefined, body?: unknown) => {
    setupRequests++
    const res = await send({
      method,
      url: base + url,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    let json: any = null
    try {
      json = JSON.parse(res.body)
    } catch {
      json = null
    }
    return { ...res, json }
  }
  const must = async (what: string, p: Promise<Awaited<ReturnType<typeof call>>>) => {
    const res = await p
    if (res.status !== 200) throw new Error(`${what}: ${res.status} ${res.body.slice(0, 300)}`)
    return res.json
  }
  const targets = { failing: await markerTarget(500), refusing: await markerTarget(403) }
  const silent = await silentPort()
  let server = await start({ ...env, ...lifted }, path.join(dir, 'server.log'), { pin: false })
  const t0 = performance.now()
  try {
    // Every credential kind.
    const login = async (username: string) => (await must(`login ${username}`, call('POST', '/Auth/LocalLogin', undefined, { username, password: PASSWORD }))).token as string
    const creds: Credentials = { garbage: 'x', administrator: await login('admin') }
    for (const [name, profile] of [
      ['attack-manager', 20],
      ['attack-user', 10],
      ['flood-victim', 10],
    ] as const) {
      await must(`adduser ${name}`, call('POST', '/admin/adduser', creds.administrator, { userName: name, email: `${name}@example.com`, userProfile: profile, password: PASSWORD }))
    }
    creds.manager = await login('attack-manager')
    creds.user = await login('attack-user')
    let tokens = 0
    const integration = async () =>
      (await must('integration token', call('POST', '/admin/integrationTokens', creds.administrator, { name: `attack-siem-${++tokens}`, userProfile: 10 }))).token as string
    creds.integration = await integration()
    // A new machine each time: enrolling a known machine again without its credential is
    // held for an Administrator (202), as an impostor's would be.
    const enroll = async () =>
      (await must('enroll', call('POST', '/gateway/enroll', undefined, { enrollmentSecret: ENROLL, machineId: crypto.randomUUID(), hostIdentifier: 'ATTACK-HOST' }))).credential as string
    creds.agent = await enroll()
    let pollers = 0
    const register = async () =>
      (
        await must(
          'poller register',
          call('POST', '/agents/agentless/poller/register', undefined, { enrollmentSecret: POLLER_SECRET, name: `attack-poller-${++pollers}`, hostName: 'attack-vm', version: '1.0.0' }),
        )
      ).credential as string
    creds.poller = await register()
    const renew = async (kind: CredentialKind): Promise<string | undefined> => {
      try {
        if (kind === 'administrator') return await login('admin')
        if (kind === 'manager') return await login('attack-manager')
        if (kind === 'user') return await login('attack-user')
        if (kind === 'integration') return await integration()
        if (kind === 'agent') return await enroll()
        if (kind === 'poller') return await register()
      } catch {
        return undefined
      }
      return undefined
    }
    const checkIn = { hostIdentifier: 'ATTACK-HOST', operationalStatus: 'Free', peripherals: [] }
    await must('check-in', call('POST', '/gateway/checkin', creds.agent, checkIn))

    // Alarm destinations whose targets answer with the marker, and two that cannot be reached.
    const closedPort = await freePort()
    const dest = async (name: string, body: object) => (await must(`destination ${name}`, call('POST', '/Events/AddOrUpdateAlarmDest', creds.administrator, { name, ...body }))).id as string
    const hook = (url: string, feeds: string[]) => ({ type: 'webhook', filters: { minimumSeverity: 'Debug', feeds }, webhook: { url, secret: 'attack-webhook-secret-0123' } })
    const ids = {
      failing: await dest('attack-failing', hook(targets.failing.url, ['events', 'audit'])),
      refusing: await dest('attack-refusing', hook(targets.refusing.url, ['events', 'audit'])),
      closed: await dest('attack-closed', hook(`http://127.0.0.1:${closedPort}/`, ['events'])),
      silent: await dest('attack-silent', hook(`http://127.0.0.1:${silent.port}/`, ['events'])),
      closedSyslog: await dest('attack-closed-syslog', { type: 'syslog', filters: { feeds: ['events'] }, syslog: { host: '127.0.0.1', port: closedPort, transport: 'tcp' } }),
    }
    const tested = await call('POST', '/Events/TestAlarmDests', creds.manager, Object.values(ids))
    const testOp = ops.get('testAlarmDests')!
    const verdict = judge(testOp, tested)
    if (verdict) findings.push({ ...verdict, operationId: 'testAlarmDests', label: 'test of the marker destinations', status: tested.status })
    if (tested.body.includes(MARKER))
      findings.push({ kind: 'read-back', operationId: 'testAlarmDests', label: 'test of the marker destinations', status: tested.status, detail: "TestAlarmDests answered a target's answer" })
    const timing = Object.fromEntries((tested.json?.results ?? []).map((r: any) => [r.name, { code: r.code, durationMs: r.durationMs, error: r.error }]))
    // The worker's deliveries to the marker targets (the destinations' own audit records are queued for them).
    for (let i = 0; i < 100; i++) {
      const list = await call('GET', '/Events/GetAlarmDests', creds.user)
      const byName = new Map((list.json?.data ?? []).map((d: any) => [d.name, d.delivery]))
      if ((byName.get('attack-failing') as any)?.lastStatus && (byName.get('attack-refusing') as any)?.lastStatus) break
      await new Promise((r) => setTimeout(r, 200))
    }

    // Every operation: valid and invalid requests, every credential kind and none.
    let lastShown = 0
    const fuzz = await attack(spec, send, creds, {
      marker: MARKER,
      renew,
      concurrency: CONCURRENCY,
      longUrl: 20_000,
      longHeader: 40_000,
      progress: (done, total, id) => {
        if (performance.now() - lastShown < 5000) return
        lastShown = performance.now()
        process.stderr.write(`  ${done}/${total} operations (${id}), ${Math.round((performance.now() - t0) / 1000)} s\n`)
      },
    })
    findings.push(...fuzz.findings)
    const readBackSeen = { failing: targets.failing.hits(), refusing: targets.refusing.hits() }

    // The stored outcomes, as a User and an Administrator read them (fuzzed logouts ended the earlier sessions).
    creds.user = await login('attack-user')
    creds.administrator = await login('admin')
    for (const [op, url, token] of [
      ['getAlarmDests', '/Events/GetAlarmDests', creds.user],
      ['getEvents', '/Events/GetEvents?category=System&pageSize=1000', creds.user],
      ['getAuditTrails', '/Events/GetAuditTrails?pageSize=1000', creds.administrator],
    ] as const) {
      const res = await call('GET', url, token)
      if (res.body.includes(MARKER)) findings.push({ kind: 'read-back', operationId: op, label: 'stored delivery outcomes', status: res.status, detail: "carries an alarm target's answer" })
    }
    const stored = (await call('GET', '/Events/GetAlarmDests', creds.user)).json?.data
      ?.filter((d: any) => d.name.startsWith('attack-'))
      .map((d: any) => ({ name: d.name, lastStatus: d.delivery.lastStatus, lastError: d.delivery.lastError }))

    // Floods, with the production limits.
    let restarts = 0
    const flood = async (label: string, operationId: string, req: () => AttackRequest) => {
      // Each flood meets fresh per-address budgets: the server starts again before it.
      await stop(server)
      server = await start(env, path.join(dir, `server-limits-${++restarts}.log`), { pin: false })
      const op = ops.get(operationId)!
      const statuses: Record<string, number> = {}
      const times: number[] = []
      let next = 0
      if (operationId === 'agentCheckIn') creds.agent = await enroll()
      const started = performance.now()
      await Promise.all(
        Array.from({ length: FLOOD_CONCURRENCY }, async () => {
          while (next < FLOOD_REQUESTS) {
            next++
            const r = req()
            const s = performance.now()
            try {
              const answer = await send(r)
              times.push(performance.now() - s)
              statuses[answer.status] = (statuses[answer.status] ?? 0) + 1
              const v = judge(op, answer)
              if (v) findings.push({ ...v, operationId, label: `flood: ${label}`, status: answer.status })
            } catch (err) {
              findings.push({ kind: 'transport-error', operationId, label: `flood: ${label}`, status: 0, detail: (err as Error).message })
            }
          }
        }),
      )
      const seconds = (performance.now() - started) / 1000
      return {
        label,
        requests: FLOOD_REQUESTS,
        concurrency: FLOOD_CONCURRENCY,
        statuses,
        rps: Math.round(FLOOD_REQUESTS / seconds),
        p50: +pct(times, 0.5).toFixed(1),
        p99: +pct(times, 0.99).toFixed(1),
      }
    }
    const json = (token: string | undefined, body: unknown) => ({ 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), _body: JSON.stringify(body) })
    const asReq = (method: string, url: string, h: Record<string, string>): AttackRequest => {
      const { _body, ...headers } = h
      return { method, url: base + url, headers, body: _body }
    }
    creds.user = await login('attack-user')
    const floods = [
      await flood('login, wrong password of an existing account', 'localLogin', () =>
        asReq('POST', '/Auth/LocalLogin', json(undefined, { username: 'flood-victim', password: 'Wrong-password-0000' })),
      ),
      await flood('gateway check-in with the agent credential', 'agentCheckIn', () => asReq('POST', '/gateway/checkin', json(creds.agent, checkIn))),
      await flood('read: GetEvents as a User', 'getEvents', () => ({ method: 'GET', url: `${base}/Events/GetEvents?pageSize=20`, headers: { authorization: `Bearer ${creds.user}` } })),
    ]
    // After the login flood (per-address budgets are gone with the restarts, a lockout is
    // kept in the database): from another address, the account's own user still gets in
    // unless the flood locked the account.
    const other = httpSender(port, new http.Agent(), '127.0.0.2')
    const victim = await other({
      method: 'POST',
      url: `${base}/Auth/LocalLogin`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'flood-victim', password: PASSWORD }),
    })

    const seconds = Math.round((performance.now() - t0) / 1000)
    const groups = summarize(findings)
    const slowest = [...fuzz.operations]
      .sort((a, b) => b.p99 - a.p99)
      .slice(0, 5)
      .map((o) => `${o.operationId} p50 ${o.p50.toFixed(1)} ms, p99 ${o.p99.toFixed(1)} ms, max ${o.max.toFixed(0)} ms`)
    const report = {
      requests: setupRequests + fuzz.requests + floods.reduce((n, f) => n + f.requests, 0),
      operations: fuzz.operations.length,
      seconds,
      fuzz: { requests: fuzz.requests, seconds: Math.round(fuzz.ms / 1000), statuses: fuzz.statuses, slowest },
      alarmTest: timing,
      alarmTargetsReached: readBackSeen,
      storedOutcomes: stored,
      floods,
      afterLoginFlood: `after a login flood from 127.0.0.1, the flooded account's right password from 127.0.0.2 answers ${victim.status}`,
      findings: {
        total: findings.length,
        byKind: Object.fromEntries(
          Object.entries(
            findings.reduce((m: Record<string, number>, f) => {
              m[f.kind] = (m[f.kind] ?? 0) + 1
              return m
            }, {}),
          ),
        ),
        groups,
      },
    }
    const file = path.join(os.tmpdir(), `prime-attack-report-${Date.now()}.json`)
    fs.writeFileSync(file, JSON.stringify(report, null, 2))
    console.log(`attack run: ${report.requests} requests over ${report.operations} operations in ${seconds} s`)
    console.log(`fuzzing: ${fuzz.requests} requests in ${report.fuzz.seconds} s; statuses ${JSON.stringify(fuzz.statuses)}`)
    console.log(`slowest operations (p99): \n  ${slowest.join('\n  ')}`)
    console.log(`TestAlarmDests outcomes (timeout ${ALARM_TIMEOUT_SECONDS} s): ${JSON.stringify(timing)}`)
    console.log(`stored outcomes: ${JSON.stringify(stored)}`)
    for (const f of floods) console.log(`flood ${f.label}: ${f.requests} at ${f.concurrency} concurrency, ${f.rps} req/s, p50 ${f.p50} ms, p99 ${f.p99} ms, statuses ${JSON.stringify(f.statuses)}`)
    console.log(report.afterLoginFlood)
    console.log(`findings: ${findings.length} ${JSON.stringify(report.findings.byKind)}`)
    for (const g of groups) console.log(`  [${g.kind}] ${g.operationId} ${g.status} x${g.count}: ${g.example}`)
    console.log(`report: ${file}`)
    process.exitCode = findings.length > 0 ? 1 : 0
  } finally {
    await stop(server)
    agent.destroy()
    targets.failing.close()
    targets.refusing.close()
    silent.close()
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 })
  }
}

// Stopped early: the server and the temporary data dir go too (bench-support stops the server on exit).
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130))

await main()
