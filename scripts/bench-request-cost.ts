// npm run bench -- request-cost: what one small authenticated request costs in our hooks and
// handlers, in process (app.inject: no sockets, no HTTP parsing, which no tree changes), as
// CPU and wall time per request. With BENCH_OTHER_TREE=<a built checkout> the app of that
// tree (A) and of this one (B) run in the same process, alternating rounds, so that a machine
// busy with other work slows both alike; the ratio B/A is taken per round. A bare Fastify
// route answering the same JSON with the same headers and request log is the reference.
// BENCH_PROFILE=<dir>: afterwards each tree runs the same requests under the inspector's
// profiler; the profiles are written there and the functions by self time are compared.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Session } from 'node:inspector/promises'
import { pathToFileURL } from 'node:url'
import Fastify, { LogController, type FastifyInstance } from 'fastify'
import pino from 'pino'
import { projectRoot } from '../lib/paths.js'
import { median } from './bench-support.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9)
const N = Number(process.env.BENCH_REQUESTS ?? 3000)
const BLOCK = 100
const URL_PATH = process.env.BENCH_URL ?? '/prime/webui/admin/getuserdetails'
const PASSWORD = 'Bench-password-123'
const other = process.env.BENCH_OTHER_TREE ? path.resolve(process.env.BENCH_OTHER_TREE) : undefined
const dataDirs: string[] = []

interface Subject {
  name: string
  app: FastifyInstance
  headers: Record<string, string>
  /** CPU µs and wall µs per request, one entry per round. */
  cpu: number[]
  wall: number[]
}

/** The app of the tree at `root` (its built dist/), on a fresh data dir, its log in a file as in production, an admin logged in. */
async function treeApp(name: string, root: string): Promise<Subject> {
  const dist = (p: string) => pathToFileURL(path.join(root, 'dist', p)).href
  const { loadConfig } = await import(dist('lib/config.js'))
  const { buildApp } = await import(dist('lib/app.js'))
  const { LineBatcher } = await import(dist('lib/log.js'))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-cost-'))
  dataDirs.push(dir)
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: PASSWORD, LOG_LEVEL: 'info', PRIME_RATE_LIMIT_MAX: '100000000' })
  const logStream = new LineBatcher(pino.destination({ dest: path.join(dir, 'server.log'), sync: true }))
  const app: FastifyInstance = await buildApp({ config, logStream })
  await app.ready()
  const login = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: PASSWORD } })
  if (login.statusCode !== 200) throw new Error(`${name}: login answered ${login.statusCode} ${login.body}`)
  return { name, app, headers: { authorization: `Bearer ${login.json().token}` }, cpu: [], wall: [] }
}

/** A bare Fastify route answering `body` with `headers`, one request line per request as the API logs them (scripts/bare-server.ts's /logged/). */
async function referenceApp(body: unknown, headers: Record<string, string>): Promise<Subject> {
  const { LineBatcher, lazyChildLogger, requestLineWriter } = await import('../lib/log.js')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-cost-'))
  dataDirs.push(dir)
  const lines = new LineBatcher(pino.destination({ dest: path.join(dir, 'requests.log'), sync: true }))
  const app = Fastify({ logger: { level: 'info', stream: lines }, logController: new LogController({ disableRequestLogging: true }), childLoggerFactory: lazyChildLogger })
  const requestLine = requestLineWriter(app.log)
  app.addHook('onResponse', (req, reply, done) => {
    requestLine(req, reply)
    done()
  })
  app.get(URL_PATH, async (_req, reply) => reply.headers(headers).send(body))
  await app.ready()
  return { name: 'bare route, same headers and request log', app, headers: {}, cpu: [], wall: [] }
}

/** N requests one after another; CPU (user and system, the whole process) and wall µs per request. */
async function run(s: Subject, n: number): Promise<{ cpu: number; wall: number }> {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    const res = await s.app.inject({ method: 'GET', url: URL_PATH, headers: s.headers })
    if (res.statusCode !== 200) throw new Error(`${s.name}: ${URL_PATH} answered ${res.statusCode} ${res.body}`)
  }
  const wall = ((performance.now() - t0) * 1000) / n
  const c = process.cpuUsage(c0)
  return { cpu: (c.user + c.system) / n, wall }
}

const spread = (xs: number[]) => `${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}`

const b = await treeApp(`this tree (${path.basename(projectRoot)})`, projectRoot)
const a = other ? await treeApp(`other tree (${path.basename(other)})`, other) : undefined
const sample = await b.app.inject({ method: 'GET', url: URL_PATH, headers: b.headers })
const ownHeaders = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding'])
const answerHeaders = Object.fromEntries(
  Object.entries(sample.headers)
    .filter(([k]) => !ownHeaders.has(k))
    .map(([k, v]) => [k, String(v)]),
)
const ref = await referenceApp(sample.json(), answerHeaders)
const subjects = [...(a ? [a] : []), b, ref]

// Warm-up: the JIT, the validators compiled on first use, the statements prepared.
for (const s of subjects) await run(s, Math.min(N, 2000))
const ratios: number[] = [],
  wallRatios: number[] = [],
  refRatios: number[] = []
for (let r = 0; r < ROUNDS; r++) {
  // A round is N requests of each subject in blocks of BLOCK, the subjects taking turns block
  // by block (the order turning each time): other work on the machine comes and goes within
  // seconds, and so falls on all of them alike.
  const sums = new Map(subjects.map((s) => [s, { cpu: 0, wall: 0 }]))
  for (let k = 0; k < N / BLOCK; k++) {
    for (const s of k % 2 === 0 ? subjects : [...subjects].reverse()) {
      const m = await run(s, BLOCK)
      sums.get(s)!.cpu += m.cpu / (N / BLOCK)
      sums.get(s)!.wall += m.wall / (N / BLOCK)
    }
  }
  for (const s of subjects) {
    s.cpu.push(sums.get(s)!.cpu)
    s.wall.push(sums.get(s)!.wall)
  }
  if (a) ratios.push(b.cpu[r] / a.cpu[r])
  if (a) wallRatios.push(b.wall[r] / a.wall[r])
  refRatios.push(ref.cpu[r] / b.cpu[r])
}

console.log(`\nGET ${URL_PATH} by app.inject, ${ROUNDS} rounds of ${N} requests of each, in alternating blocks of ${BLOCK}; medians and (min–max) over the rounds.\n`)
console.log('| subject | CPU µs per request | spread | wall µs per request | spread |')
console.log('|---|---|---|---|---|')
for (const s of subjects) console.log(`| ${s.name} | ${median(s.cpu).toFixed(1)} | ${spread(s.cpu)} | ${median(s.wall).toFixed(1)} | ${spread(s.wall)} |`)
console.log('')
if (a) {
  console.log(
    `Ratio this/other tree, per round: CPU median ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}), wall median ${median(wallRatios).toFixed(3)}`,
  )
  const aRef = a.cpu.map((x, i) => ref.cpu[i] / x)
  console.log(`Ratio bare route/other tree (CPU): median ${median(aRef).toFixed(3)}`)
}
console.log(`Ratio bare route/this tree (CPU): median ${median(refRatios).toFixed(3)} (${Math.min(...refRatios).toFixed(3)}–${Math.max(...refRatios).toFixed(3)})`)

if (process.env.BENCH_PROFILE) await profileAll(process.env.BENCH_PROFILE, a ? [a, b] : [b])

for (const s of subjects) await s.app.close()
for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true })

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** Each tree's requests under the profiler, its profile written to `dir`, and its functions by self and total time per request. */
async function profileAll(dir: string, trees: Subject[]): Promise<void> {
  fs.mkdirSync(dir, { recursive: true })
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.setSamplingInterval', { interval: 50 })
  const tables: Map<string, { self: number; total: number }>[] = []
  const n = N * 3
  for (const s of trees) {
    await session.post('Profiler.start')
    await run(s, n)
    const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: Profile }
    const file = path.join(dir, `${s.name.replace(/\W+/g, '-')}.cpuprofile`)
    fs.writeFileSync(file, JSON.stringify(profile))
    console.log(`\nProfile of ${s.name}: ${file}`)
    tables.push(byFunction(profile, n))
  }
  session.disconnect()
  trees.forEach((s, i) => {
    const rows = [...tables[i]].sort((x, y) => y[1].self - x[1].self).slice(0, 30)
    console.log(`\n${s.name}: top 30 functions by self time, µs per request (self / total)\n`)
    for (const [k, v] of rows) console.log(`${v.self.toFixed(2).padStart(7)} ${v.total.toFixed(2).padStart(7)}  ${k}`)
  })
  if (trees.length === 2) {
    const [ta, tb] = tables
    const keys = new Set([...ta.keys(), ...tb.keys()])
    const diff = [...keys].map((k) => ({ k, self: (tb.get(k)?.self ?? 0) - (ta.get(k)?.self ?? 0), total: (tb.get(k)?.total ?? 0) - (ta.get(k)?.total ?? 0) }))
    console.log(`\nLargest differences (this minus other), µs per request, by self time (self / total):\n`)
    for (const d of diff.sort((x, y) => Math.abs(y.self) - Math.abs(x.self)).slice(0, 30)) console.log(`${d.self.toFixed(2).padStart(7)} ${d.total.toFixed(2).padStart(7)}  ${d.k}`)
    console.log(`\nLargest differences by total time:\n`)
    for (const d of diff.sort((x, y) => Math.abs(y.total) - Math.abs(x.total)).slice(0, 30)) console.log(`${d.self.toFixed(2).padStart(7)} ${d.total.toFixed(2).padStart(7)}  ${d.k}`)
  }
}

/**
 * Self and total (inclusive: counted once per sample whatever the recursion) time per
 * request of each function, named by its name and its file within its tree (the trees'
 * line numbers differ), so that the two trees' tables compare function by function.
 */
function byFunction(profile: Profile, requests: number): Map<string, { self: number; total: number }> {
  const parent = new Map<number, number>()
  const byId = new Map<number, ProfileNode>()
  for (const node of profile.nodes) {
    byId.set(node.id, node)
    for (const c of node.children ?? []) parent.set(c, node.id)
  }
  const keyOf = (node: ProfileNode) => {
    const { functionName, url } = node.callFrame
    const file = url.replace(/^file:\/\//, '').replace(/^.*?\/(dist|node_modules)\//, '$1/')
    return `${functionName || '(anonymous)'} ${file || ''}`.trim()
  }
  const out = new Map<string, { self: number; total: number }>()
  const entry = (k: string) => out.get(k) ?? out.set(k, { self: 0, total: 0 }).get(k)!
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] / requests
    const node = byId.get(id)!
    entry(keyOf(node)).self += dt
    const seen = new Set<string>()
    for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
      const k = keyOf(byId.get(n)!)
      if (seen.has(k)) continue
      seen.add(k)
      entry(k).total += dt
    }
  })
  return out
}
