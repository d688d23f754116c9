// Agentless at scale, in process (app.inject, no network): importing BENCH_CONNECTIONS
// (10,000, the import's row limit) connections from CSV and importing the same file again,
// recording one run each from a poller in reports of 1000, the status list with its
// filters, the CSV export, and ReplayAll of every host to one subscribed webhook.
//
//   npm run build && node dist/scripts/bench-agentless.js
//
// Settings: BENCH_CONNECTIONS (10000), BENCH_REQUESTS per list case (200), BENCH_ROUNDS of
// the import and export cases (3).
import crypto from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { pct, median, ms } from './bench-support.js'

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10_000)
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const SECRET = 'pes_bench-agentless-poller-secret'
const PASSWORD = 'Bench-password-123'
const API = '/prime/webui/agents/agentless'

const p95 = (xs: number[]) => pct(xs, 0.95)
const rows: string[][] = []
const row = (...cells: (string | number)[]) => rows.push(cells.map(String))

function multipart(csv: string) {
  const boundary = '----bench-boundary'
  return {
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    payload: `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.csv"\r\nContent-Type: text/csv\r\n\r\n${csv}\r\n--${boundary}--\r\n`,
  }
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-agentless-'))
const hook = http.createServer((req, res) => req.resume().on('end', () => res.writeHead(204).end()))
await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve))
const app = await buildApp({
  config: loadConfig({
    PRIME_DATA_DIR: dir,
    PRIME_ADMIN_PASSWORD: PASSWORD,
    PRIME_POLLER_ENROLLMENT_SECRET: SECRET,
    LOG_LEVEL: 'warn',
    PRIME_RATE_LIMIT_MAX: '100000000',
    PRIME_ALARM_ALLOWED_HOSTS: '127.0.0.1',
  }),
  logger: false,
})
try {
  const login = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: PASSWORD } })
  const headers = { authorization: `Bearer ${login.json().token}` }
  const reg = (await app.inject({ method: 'POST', url: `${API}/poller/register`, payload: { enrollmentSecret: SECRET, name: 'bench-poller', version: '1.0.0' } })).json()
  await app.inject({ method: 'PUT', url: `${API}/workerpollerdetails/activatedstatus`, headers, payload: { pollerId: reg.pollerId, isActivated: true } })

  // The import: new connections, then the same file again (every row unchanged).
  const lines = ['name,address,protocol,port,useTls,userName,password,isOverrideDefaults,pollingIntervalSeconds,timeoutSeconds,pollerId']
  for (let i = 0; i < CONNECTIONS; i++) {
    const own = i % 4 === 0
    lines.push(
      `host-${String(i).padStart(5, '0')}.corp.example,10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255},${i % 5 ? 'SSH' : 'WinRM'},,,svc-${i % 7},pw-${i}-secret,${own},${own ? '600,20' : ','},${reg.pollerId}`,
    )
  }
  const csv = lines.join('\r\n') + '\r\n'
  let t0 = performance.now()
  const first = await app.inject({ method: 'POST', url: `${API}/uploadconnectiondetailsfile`, headers: { ...headers, ...multipart(csv).headers }, payload: multipart(csv).payload })
  const importMs = performance.now() - t0
  if (first.json().imported !== CONNECTIONS) throw new Error(`import: ${first.body.slice(0, 300)}`)
  row('CSV import, new', `${CONNECTIONS} rows (${(csv.length / 1048576).toFixed(2)} MiB)`, ms(importMs), '', `${ms(CONNECTIONS / (importMs / 1000))} rows/s`)
  const again: number[] = []
  for (let r = 0; r < ROUNDS; r++) {
    t0 = performance.now()
    const res = await app.inject({ method: 'POST', url: `${API}/uploadconnectiondetailsfile`, headers: { ...headers, ...multipart(csv).headers }, payload: multipart(csv).payload })
    again.push(performance.now() - t0)
    if (res.json().unchanged !== CONNECTIONS) throw new Error('re-import changed rows')
  }
  row('CSV import, same file again', `${CONNECTIONS} rows unchanged`, ms(median(again)), '', `${ms(CONNECTIONS / (median(again) / 1000))} rows/s`)

  // One run per connection, reported 1000 at a time; a tenth of them failing.
  const ids = app.db.prepare('SELECT id FROM agentless_connections ORDER BY id').pluck().all() as number[]
  const reports: number[] = []
  const now = Date.now()
  for (let i = 0; i < ids.length; i += 1000) {
    const runs = ids.slice(i, i + 1000).map((id, j) => {
      const ok = (i + j) % 10 !== 0
      return {
        runId: crypto.randomUUID(),
        connectionId: id,
        statusString: ok ? 'Reachable' : 'Unreachable',
        startTime: new Date(now - 60_000 + j).toISOString(),
        endTime: new Date(now - 59_000 + j).toISOString(),
        statusDescription: ok ? 'SSH server SSH-2.0-OpenSSH_9.6 answered.' : 'TCP connect failed.',
        statusErrorDescription: ok ? null : `Connection timed out after 10 s (${id}).`,
      }
    })
    t0 = performance.now()
    const res = await app.inject({ method: 'POST', url: `${API}/poller/runs`, headers: { authorization: `Bearer ${reg.credential}` }, payload: { runs } })
    reports.push(performance.now() - t0)
    if (res.json().succeeded !== runs.length) throw new Error(`runs: ${res.body.slice(0, 300)}`)
  }
  row('Run report (1000 runs)', `${reports.length} reports`, ms(median(reports)), ms(p95(reports)), `${ms(1000 / (median(reports) / 1000))} runs/s`)

  // The status list, one request at a time.
  const cases: [string, string][] = [
    ['list, first page (default order)', ''],
    ['list, last page of 100', `PageSize=100&PageNumber=${Math.ceil(CONNECTIONS / 100)}`],
    ['list, GlobalSearch', 'GlobalSearch=host-0999'],
    ['list, StatusString + sort by start', 'StatusString=unreach&SortBy=startTime_desc'],
    ['list, PrevRunningErrors (none match)', 'PrevRunningErrors=refused'],
    ['list, date range + IsOverrideDefaults', `FromTimeStart=${new Date(now - 3_600_000).toISOString()}&IsOverrideDefaults=true`],
  ]
  for (const [name, query] of cases) {
    const times: number[] = []
    let filtered = 0
    for (let r = 0; r < REQUESTS; r++) {
      t0 = performance.now()
      const res = await app.inject({ method: 'GET', url: `${API}/connectiondetailsstatus?${query}`, headers })
      times.push(performance.now() - t0)
      filtered = res.json().recordsFiltered
    }
    row(name, `${filtered} of ${CONNECTIONS} match`, ms(median(times)), ms(p95(times)), `${ms(1000 / median(times))} req/s`)
  }

  // The exports of every row.
  for (const what of ['exportagentlesscsv', 'exportcsvconnections'] as const) {
    const times: number[] = []
    let bytes = 0
    for (let r = 0; r < ROUNDS; r++) {
      t0 = performance.now()
      const res = await app.inject({ method: 'POST', url: `${API}/${what}`, headers })
      times.push(performance.now() - t0)
      bytes = res.rawPayload.length
    }
    row(`export ${what}`, `${CONNECTIONS} rows, ${(bytes / 1048576).toFixed(2)} MiB`, ms(median(times)), '', `${ms(CONNECTIONS / (median(times) / 1000))} rows/s`)
  }

  // ReplayAll to one webhook subscribed to assets (the time to queue, not to deliver).
  await app.inject({
    method: 'POST',
    url: '/prime/webui/Events/AddOrUpdateAlarmDest',
    headers,
    payload: {
      name: 'bench-assets',
      type: 'webhook',
      filters: { feeds: ['assets'] },
      webhook: { url: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/`, secret: 'bench-asset-feed-secret' },
    },
  })
  t0 = performance.now()
  const replay = await app.inject({ method: 'POST', url: '/prime/webui/assetproducer/ReplayAll', headers })
  const replayMs = performance.now() - t0
  row('ReplayAll (queue)', `${replay.json().assetsQueued} assets, 1 destination`, ms(replayMs), '', `${ms(replay.json().assetsQueued / (replayMs / 1000))} assets/s`)
  t0 = performance.now()
  const moved = await app.inject({ method: 'POST', url: '/prime/webui/assetproducer/SendMonitorOldLocation', headers })
  row('SendMonitorOldLocation, nothing moved', `${moved.json().assetsQueued} queued`, ms(performance.now() - t0), '', '')

  const widths = [0, 1, 2, 3, 4].map((c) => Math.max(...[['case', 'size', 'median ms', 'p95 ms', 'rate'], ...rows].map((r) => r[c].length)))
  const print = (r: string[]) => console.log(r.map((c, i) => (i >= 2 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  '))
  print(['case', 'size', 'median ms', 'p95 ms', 'rate'])
  for (const r of rows) print(r)
} finally {
  await app.close()
  hook.close()
  fs.rmSync(dir, { recursive: true, force: true })
}
