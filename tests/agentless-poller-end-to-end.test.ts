// The agentless story with a real worker poller process against real listeners on
// 127.0.0.1: a new user uploads 50 connections (three bad rows reported by line),
// registers them to the running poller, sees runs (reachable and unreachable), exports
// and uploads again without duplicates, deactivates the poller and sees checks stop,
// replays every asset to a local webhook, and deletes the poller, which then stops.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { build, call, login, userWithProfile } from './helpers.js'
import { ENROLLMENT_SECRET, gatewayEnv, hostState, mouse, stick } from './fixtures/gateway.js'
import { projectRoot } from '../lib/paths.js'

const POLLER_SECRET = 'pes_end-to-end-poller-secret'

const API = '/prime/webui/agents/agentless'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const v = await probe()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)))
}

function multipart(name: string, csv: string) {
  const boundary = '----prime-e2e-boundary'
  return {
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    payload: `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: text/csv\r\n\r\n${csv}\r\n--${boundary}--\r\n`,
  }
}

t.test('a worker poller checks uploaded connections, stops when deactivated, and assets replay to a webhook', async (t) => {
  // The poller runs from the build, compiled only when stale (the test runner builds first):
  // a whole tsc here would rewrite dist/ under the other files' server processes.
  const built = spawnSync(process.execPath, [path.join(projectRoot, 'scripts', 'build-if-stale.mjs')], { cwd: projectRoot, encoding: 'utf8' })
  const pollerJs = path.join(projectRoot, 'dist', 'scripts', 'poller.js')
  t.ok(fs.existsSync(pollerJs), `the poller is built (${built.stdout.slice(0, 500)})`)

  // An SSH-like service, a WinRM-like service, and a port where nothing listens.
  const sshServer = net.createServer((s) => s.end('SSH-2.0-OpenSSH_9.6 PrimeTest\r\n'))
  const sshPort = await listen(sshServer)
  const winrm = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      if (req.url === '/wsman' && req.headers.wsmanidentify === 'unauthenticated' && body.includes('Identify')) {
        res
          .writeHead(200, { 'content-type': 'application/soap+xml' })
          .end(
            '<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><wsmid:IdentifyResponse xmlns:wsmid="x">' +
              '<wsmid:ProductVendor>Microsoft Corporation</wsmid:ProductVendor><wsmid:ProductVersion>OS: 10.0.20348 SP: 0.0 Stack: 3.0</wsmid:ProductVersion>' +
              '</wsmid:IdentifyResponse></s:Body></s:Envelope>',
          )
      } else res.writeHead(404).end()
    })
  })
  const winrmPort = await listen(winrm)
  const closer = net.createServer()
  const closedPort = await listen(closer)
  await new Promise((resolve) => closer.close(resolve))
  // The webhook that receives the asset feed.
  const received: any[] = []
  const hook = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      received.push(JSON.parse(body))
      res.writeHead(204).end()
    })
  })
  const hookPort = await listen(hook)
  t.teardown(() => {
    sshServer.close()
    winrm.close()
    hook.close()
  })

  const app = await build(t, { ...gatewayEnv, PRIME_ALARM_ALLOWED_HOSTS: '127.0.0.1', PRIME_POLLER_ENROLLMENT_SECRET: POLLER_SECRET, PRIME_POLLER_HEARTBEAT_SECONDS: '1' })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const serverUrl = `http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'agentless-operator', 20)

  // The poller process registers itself; it is not activated yet.
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-poller-'))
  let output = ''
  const poller: ChildProcess = spawn(process.execPath, [pollerJs], {
    env: { ...process.env, PRIME_SERVER_URL: serverUrl, PRIME_POLLER_ENROLLMENT_SECRET: POLLER_SECRET, PRIME_POLLER_NAME: 'poller-e2e', PRIME_POLLER_STATE_FILE: path.join(stateDir, 'state.json') },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  poller.stdout!.on('data', (c) => (output += c))
  poller.stderr!.on('data', (c) => (output += c))
  const exited = new Promise<number | null>((resolve) => poller.on('exit', (code) => resolve(code)))
  t.teardown(() => {
    poller.kill()
    fs.rmSync(stateDir, { recursive: true, force: true })
  })
  const pollers = () => call(app, manager, { method: 'GET', url: `${API}/workerpollerdetails` }).then((r) => r.json())
  const registered = await until('the poller to register and send a heartbeat', async () => {
    const p = (await pollers()).data[0]
    return p?.connectionStatus === 'Online' && p
  })
  t.match(registered, { name: 'poller-e2e', isActivated: false, version: '1.0.0' })
  t.equal(fs.statSync(path.join(stateDir, 'state.json')).mode & 0o777, 0o600, 'the poller keeps its credential readable by itself only')

  // 50 rows: SSH hosts that answer, SSH hosts where nothing listens, WinRM hosts; three bad rows.
  const lines = ['name,address,protocol,port,useTls,userName,password']
  const bad = new Map<number, string>()
  for (let i = 1; i <= 50; i++) {
    const line = i + 1
    if (i === 7) {
      bad.set(line, 'address')
      lines.push(`host-${i},0.0.0.0,SSH,${sshPort},,svc,pw-${i}-secret`)
    } else if (i === 23) {
      bad.set(line, 'protocol')
      lines.push(`host-${i},127.0.0.1,RDP,${sshPort},,svc,pw-${i}-secret`)
    } else if (i === 41) {
      bad.set(line, 'password')
      lines.push(`host-${i},127.0.0.1,SSH,${sshPort},,svc,`)
    } else if (i % 5 === 0) lines.push(`host-${i},127.0.0.1,WinRM,${winrmPort},false,CORP\\svc,pw-${i}-secret`)
    else if (i % 3 === 0) lines.push(`host-${i},127.0.0.1,SSH,${closedPort},,svc,pw-${i}-secret`)
    else lines.push(`host-${i},127.0.0.1,SSH,${sshPort},,svc,pw-${i}-secret`)
  }
  const upload = await call(app, manager, { method: 'POST', url: `${API}/uploadconnectiondetailsfile`, ...multipart('connections.csv', lines.join('\r\n') + '\r\n') })
  t.equal(upload.statusCode, 200, upload.body)
  const first = upload.json()
  t.match(first, { totalRows: 50, imported: 47, updated: 0, unchanged: 0, rejected: 3 })
  const rejected = first.rows.filter((r: any) => r.result === 'rejected')
  t.same(
    rejected.map((r: any) => r.line),
    [...bad.keys()],
    'the bad rows are reported by their lines',
  )
  for (const r of rejected)
    t.ok(
      r.errors.some((e: any) => e.column === bad.get(r.line)),
      `line ${r.line} names column ${bad.get(r.line)}`,
    )
  t.notOk(upload.body.includes('-secret'), 'no credential in the answer')
  const ids = first.rows.filter((r: any) => r.result === 'imported').map((r: any) => r.connectionId)

  // Activated and given the connections, the poller checks each of them.
  const activate = (isActivated: boolean) => call(app, manager, { method: 'PUT', url: `${API}/workerpollerdetails/activatedstatus`, payload: { pollerId: registered.id, isActivated } })
  t.equal((await activate(true)).json().isActivated, true)
  const reg = await call(app, manager, { method: 'POST', url: `${API}/registration`, payload: { pollerId: registered.id, connectionIds: ids } })
  t.match(reg.json(), { succeeded: 47, failed: 0 })
  const statuses = async () => (await call(app, manager, { method: 'GET', url: `${API}/connectiondetailsstatus?PageSize=100` })).json().data as any[]
  const checked = await until('every connection to be checked', async () => {
    const rows = await statuses()
    return rows.every((r) => ['Reachable', 'Unreachable', 'Failed'].includes(r.statusString)) && rows
  })
  const byName = new Map(checked.map((r) => [r.computerName, r]))
  const expect = (i: number) => (i % 5 === 0 ? 'Reachable' : i % 3 === 0 ? 'Unreachable' : 'Reachable')
  for (let i = 1; i <= 50; i++) {
    if ([7, 23, 41].includes(i)) continue
    const r = byName.get(`host-${i}`)
    t.equal(r.statusString, expect(i), `host-${i} is ${expect(i)} (${r.statusDescription} / ${r.statusErrorDescription})`)
  }
  t.match(byName.get('host-1'), { statusDescription: /SSH server SSH-2\.0-OpenSSH_9\.6 PrimeTest answered/, statusErrorDescription: null, lastReachableTime: String })
  t.match(byName.get('host-3'), { statusErrorDescription: /refused/, lastReachableTime: null, durationMs: Number })
  t.match(byName.get('host-5'), { statusDescription: /Microsoft Corporation, OS: 10\.0\.20348/ })
  const details = (await pollers()).data[0]
  t.match(details, { isActivated: true, connectionsAssigned: 47, connectionsReachable: 47 - 13, connectionsFailing: 13, connectionsPending: 0 })

  // Export in the import format, upload it again: nothing new, nothing changed.
  const exported = await call(app, manager, { method: 'POST', url: `${API}/exportcsvconnections` })
  t.equal(exported.statusCode, 200)
  t.match(exported.headers['content-disposition'], /^attachment; filename="agentless-connections-\d{8}T\d{6}Z\.csv"$/)
  t.notOk(exported.body.includes('-secret'), 'the export holds no credential')
  const again = await call(app, manager, { method: 'POST', url: `${API}/uploadconnectiondetailsfile`, ...multipart('exported.csv', exported.body) })
  t.match(again.json(), { totalRows: 47, imported: 0, updated: 0, unchanged: 47, rejected: 0 })
  t.equal((await call(app, manager, { method: 'GET', url: `${API}/connectiondetailsstatus` })).json().recordsTotal, 47, 'no duplicates')

  // A changed port is checked again at once while the poller is activated...
  const host3 = byName.get('host-3')
  const moved = await call(app, manager, { method: 'PUT', url: `${API}/connectiondetails`, payload: { id: host3.id, port: sshPort } })
  t.equal(moved.statusCode, 200, moved.body)
  await until('the changed connection to be checked again', async () => (await statuses()).find((r) => r.id === host3.id && r.statusString === 'Reachable'))

  // ...and no longer once it is deactivated: heartbeats go on, checks stop.
  t.equal((await activate(false)).json().isActivated, false)
  await until('the poller to stop checking', async () => output.includes('told to stop checking'))
  const host6 = byName.get('host-6')
  const before = (await statuses()).find((r) => r.id === host6.id)
  t.equal((await call(app, manager, { method: 'PUT', url: `${API}/connectiondetails`, payload: { id: host6.id, port: sshPort } })).statusCode, 200)
  const beat = (await pollers()).data[0].lastHeartbeatTime
  await until('two more heartbeats', async () => Date.parse((await pollers()).data[0].lastHeartbeatTime) >= Date.parse(beat) + 1500, 10_000)
  const after = (await statuses()).find((r) => r.id === host6.id)
  t.equal(after.startTime, before.startTime, 'a deactivated poller checks nothing')
  t.equal(after.statusString, 'Unreachable')
  t.equal((await pollers()).data[0].connectionStatus, 'Online', 'a deactivated poller keeps sending heartbeats')

  // ReplayAll delivers every asset to a webhook subscribed to the asset feed.
  const agentRes = await app.inject({
    method: 'POST',
    url: '/prime/webui/gateway/enroll',
    payload: { enrollmentSecret: ENROLLMENT_SECRET, machineId: 'agentless-e2e-machine-1', hostIdentifier: 'DESKTOP-9LR722S' },
  })
  const agentCredential = agentRes.json().credential
  const checkIn = await app.inject({ method: 'POST', url: '/prime/webui/gateway/checkin', headers: { authorization: `Bearer ${agentCredential}` }, payload: hostState([mouse, stick]) })
  t.equal(checkIn.statusCode, 200, checkIn.body)
  const dest = await call(app, manager, {
    method: 'POST',
    url: '/prime/webui/Events/AddOrUpdateAlarmDest',
    payload: { name: 'asset-hook', type: 'webhook', filters: { feeds: ['assets'] }, webhook: { url: `http://127.0.0.1:${hookPort}/assets`, secret: 'asset-hook-signing-secret' } },
  })
  t.equal(dest.statusCode, 200, dest.body)
  const replay = await call(app, manager, { method: 'POST', url: '/prime/webui/assetproducer/ReplayAll' })
  t.equal(replay.statusCode, 200, replay.body)
  t.match(replay.json(), { assetsQueued: 48, agents: 1, peripherals: 2, agentlessHosts: 47, destinations: 1, messagesQueued: 48 })
  await until('every asset at the webhook', async () => received.length >= 48, 30_000)
  t.equal(received.length, 48)
  t.ok(
    received.every((body) => body.feed === 'assets'),
    'each POST carries one asset-feed message',
  )
  const messages = received.map((body) => body.asset)
  const agentMessage = messages.find((m) => m.assetType === 'Agent')
  t.match(agentMessage, { kind: 'snapshot', trigger: 'ReplayAll', name: 'DESKTOP-9LR722S', peripherals: [{ vid: '046D' }, { vid: '0951' }] })
  t.same(new Set(messages.filter((m) => m.assetType === 'AgentlessHost').map((m) => Number(m.assetId))), new Set(ids))
  t.equal(new Set(messages.map((m) => m.messageId)).size, 48, 'every message has its own id')

  // Deleted, the poller's credential is refused and the process stops.
  const del = await call(app, admin, { method: 'DELETE', url: `${API}/workerpollerdetails?PollerId=${registered.id}` })
  t.match(del.json(), { poller: { name: 'poller-e2e' }, connectionsUnregistered: 47 })
  t.equal(await exited, 2, 'the poller exits when its credential is refused')
  t.match(output, /it was deleted there/)
})
