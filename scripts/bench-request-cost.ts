// npm run bench -- request-cost: what one small authenticated request costs in our hooks and
// handlers (app.inject: no sockets, no HTTP parsing, which no tree changes), as CPU and wall
// time per request. With BENCH_OTHER_TREE=<a built checkout> the app of that tree (A) and of
// this one (B) each run in a process of their own (as servers do: one process's modules, JIT
// and promise hooks would otherwise be shared by both), driven in turn, block by block, so
// that a machine busy with other work slows both alike; the ratio B/A is taken per round. A
// bare Fastify route answering the same JSON with the same headers and request log is the
// reference. BENCH_PROFILE=<dir>: afterwards each runs the same requests under the
// inspector's profiler; the profiles are written there and compared function by function.
import { fork, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Session } from 'node:inspector/promises'
import { fileURLToPath, pathToFileURL } from 'node:url'
import Fastify, { LogController, type FastifyInstance } from 'fastify'
import pino from 'pino'
import { projectRoot } from '../lib/paths.js'
import { median, pct } from './bench-support.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9)
const N = Number(process.env.BENCH_REQUESTS ?? 3000)
const BLOCK = Number(process.env.BENCH_BLOCK ?? 200)
const URL_PATH = process.env.BENCH_URL ?? '/prime/webui/admin/getuserdetails'
const PASSWORD = 'Bench-password-123'

/** What a subject's process is asked, and answers. */
type Ask = { run: number } | { profile: number; file: string } | { close: true }
interface Measured {
  cpu: number
  wall: number
}
interface Ready {
  body: unknown
  headers: Record<string, string>
}

/** In a subject's process: the app (of a tree, or the reference route), then what the driver asks. */
async function serve(role: string): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-cost-'))
  const { app, headers } = role === 'reference' ? await referenceApp(dir, JSON.parse(process.env.BENCH_COST_ANSWER!)) : await treeApp(role, dir)
  const sample = await app.inject({ method: 'GET', url: URL_PATH, headers })
  if (sample.statusCode !== 200) throw new Error(`${role}: ${URL_PATH} answered ${sample.statusCode} ${sample.body}`)
  // The headers of the answer that Fastify does not set itself, for the reference route.
  const own = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding'])
  const answerHeaders = Object.fromEntries(
    Object.entries(sample.headers)
      .filter(([k]) => !own.has(k))
      .map(([k, v]) => [k, String(v)]),
  )
  process.on('message', async (ask: Ask) => {
    if ('run' in ask) process.send!(await run(app, headers, ask.run))
    else if ('profile' in ask) {
      const session = new Session()
      session.connect()
      await session.post('Profiler.enable')
      await session.post('Profiler.setSamplingInterval', { interval: 50 })
      await session.post('Profiler.start')
      await run(app, headers, ask.profile)
      const { profile } = await session.post('Profiler.stop')
      session.disconnect()
      fs.writeFileSync(ask.file, JSON.stringify(profile))
      process.send!({ cpu: 0, wall: 0 })
    } else {
      await app.close()
      fs.rmSync(dir, { recursive: true, force: true })
      process.exit(0)
    }
  })
  process.send!({ body: sample.json(), headers: answerHeaders } satisfies Ready)
}

/** The app of the tree at `root` (its built dist/), on a fresh data dir, its log in a file as in production, an admin logged in. */
async function treeApp(root: string, dir: string): Promise<{ app: FastifyInstance; headers: Record<string, string> }> {
  const dist = (p: string) => pathToFileURL(path.join(root, 'dist', p)).href
  const { loadConfig } = await import(dist('lib/config.js'))
  const { buildApp } = await import(dist('lib/app.js'))
  const { LineBatcher } = await import(dist('lib/log.js'))
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: PASSWORD, LOG_LEVEL: 'info', PRIME_RATE_LIMIT_MAX: '100000000' })
  const logStream = new LineBatcher(pino.destination({ dest: path.join(dir, 'server.log'), sync: true }))
  const app: FastifyInstance = await buildApp({ config, logStream })
  await app.ready()
  const login = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: PASSWORD } })
  if (login.statusCode !== 200) throw new Error(`${root}: login answered ${login.statusCode} ${login.body}`)
  return { app, headers: { authorization: `Bearer ${login.json().token}` } }
}

/** A bare Fastify route answering `body` with `headers`, one request line per request as the API logs them (scripts/bare-server.ts's /logged/). */
async function referenceApp(dir: string, { body, headers }: Ready): Promise<{ app: FastifyInstance; headers: Record<string, string> }> {
  const { LineBatcher, lazyChildLogger, requestLineWriter } = await import('../lib/log.js')
  const lines = new LineBatcher(pino.destination({ dest: path.join(dir, 'requests.log'), sync: true }))
  const app = Fastify({ logger: { level: 'info', stream: lines }, logController: new LogController({ disableRequestLogging: true }), childLoggerFactory: lazyChildLogger })
  const requestLine = requestLineWriter(app.log)
  app.addHook('onResponse', (req, reply, done) => {
    requestLine(req, reply)
    done()
  })
  app.get(URL_PATH, async (_req, reply) => reply.headers(headers).send(body))
  await app.ready()
  return { app, headers: {} }
}

/** n requests one after another; CPU (user and system, the whole process) and wall µs per request. */
async function run(app: FastifyInstance, headers: Record<string, string>, n: number): Promise<Measured> {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    const res = await app.inject({ method: 'GET', url: URL_PATH, headers })
    if (res.statusCode !== 200) throw new Error(`${URL_PATH} answered ${res.statusCode} ${res.body}`)
  }
  const wall = ((performance.now() - t0) * 1000) / n
  const c = process.cpuUsage(c0)
  return { cpu: (c.user + c.system) / n, wall }
}

interface Subject {
  name: string
  child: ChildProcess
  ready: Ready
  /** CPU µs and wall µs per request, one entry per round. */
  cpu: number[]
  wall: number[]
  /** Every block's figures: the least disturbed blocks say what a request costs on a quiet machine. */
  blocks: Measured[]
  /** Per round: this tree's CPU and wall over this subject's, and the bare route's CPU over this subject's. */
  ratios: number[]
  wallRatios: number[]
  refRatios: number[]
}

/** A subject's process, once its app answers. */
async function start(name: string, role: string, answer?: Ready): Promise<Subject> {
  const env = { ...process.env, BENCH_COST_ROLE: role, ...(answer ? { BENCH_COST_ANSWER: JSON.stringify(answer) } : {}) }
  const child = fork(fileURLToPath(import.meta.url), [], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.once('message', (m) => resolve(m as Ready))
    child.once('exit', (code) => reject(new Error(`${name} exited ${code}`)))
  })
  child.removeAllListeners('exit')
  return { name, child, ready, cpu: [], wall: [], blocks: [], ratios: [], wallRatios: [], refRatios: [] }
}

const ask = (s: Subject, what: Ask) =>
  new Promise<Measured>((resolve) => {
    s.child.once('message', (m) => resolve(m as Measured))
    s.child.send(what)
  })

const spread = (xs: number[]) => `${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}`
const ratioCell = (xs: number[]) => `${median(xs).toFixed(3)} (${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)})`

async function drive(): Promise<void> {
  // Several other trees may be given, separated by ':' (the first is compared with in profiles).
  const others = (process.env.BENCH_OTHER_TREE ?? '')
    .split(':')
    .filter(Boolean)
    .map((t) => path.resolve(t))
  const b = await start(`this tree (${path.basename(projectRoot)})`, projectRoot)
  const rest: Subject[] = []
  for (const t of others) rest.push(await start(`other tree (${path.basename(t)})`, t))
  const a = rest[0] as Subject | undefined
  const ref = await start('bare route, same headers and request log', 'reference', b.ready)
  const subjects = [...rest, b, ref]

  // Warm-up: the JIT, the validators compiled on first use, the statements prepared.
  for (const s of subjects) await ask(s, { run: Math.min(N, 2000) })
  const refRatios: number[] = [],
    refWallRatios: number[] = []
  for (let r = 0; r < ROUNDS; r++) {
    // A round is N requests of each subject in blocks of BLOCK, the subjects taking turns block
    // by block (the order turning each time): other work on the machine comes and goes within
    // seconds, and so falls on all of them alike.
    const sums = new Map(subjects.map((s) => [s, { cpu: 0, wall: 0 }]))
    for (let k = 0; k < N / BLOCK; k++) {
      for (const s of k % 2 === 0 ? subjects : [...subjects].reverse()) {
        const m = await ask(s, { run: BLOCK })
        s.blocks.push(m)
        sums.get(s)!.cpu += m.cpu / (N / BLOCK)
        sums.get(s)!.wall += m.wall / (N / BLOCK)
      }
    }
    for (const s of subjects) {
      s.cpu.push(sums.get(s)!.cpu)
      s.wall.push(sums.get(s)!.wall)
    }
    for (const o of rest) {
      o.ratios.push(b.cpu[r] / o.cpu[r])
      o.wallRatios.push(b.wall[r] / o.wall[r])
      o.refRatios.push(ref.cpu[r] / o.cpu[r])
    }
    refRatios.push(ref.cpu[r] / b.cpu[r])
    refWallRatios.push(ref.wall[r] / b.wall[r])
  }

  console.log(`\nGET ${URL_PATH} by app.inject, ${ROUNDS} rounds of ${N} requests of each, in alternating blocks of ${BLOCK}; medians and (min–max) over the rounds.\n`)
  console.log('| subject | CPU µs per request | spread | wall µs per request | spread |')
  console.log('|---|---|---|---|---|')
  for (const s of subjects) console.log(`| ${s.name} | ${median(s.cpu).toFixed(1)} | ${spread(s.cpu)} | ${median(s.wall).toFixed(1)} | ${spread(s.wall)} |`)
  // On a loaded machine a block is often interrupted: its CPU time then includes the caches
  // refilled after the switch. The tenth percentile of the blocks is what a quiet machine shows.
  const low = (s: Subject, k: keyof Measured) =>
    pct(
      s.blocks.map((m) => m[k]),
      0.1,
    )
  console.log(`\nThe least disturbed blocks: the tenth percentile of ${b.blocks.length} blocks of each, µs per request.\n`)
  console.log('| subject | CPU | wall | CPU ratio to this tree |')
  console.log('|---|---|---|---|')
  for (const s of subjects) console.log(`| ${s.name} | ${low(s, 'cpu').toFixed(1)} | ${low(s, 'wall').toFixed(1)} | ${(low(s, 'cpu') / low(b, 'cpu')).toFixed(3)} |`)
  console.log('\nRatios per round, median (min–max):\n')
  for (const o of rest) {
    console.log(`- this tree / ${o.name}: CPU ${ratioCell(o.ratios)}, wall ${ratioCell(o.wallRatios)}`)
    console.log(`- bare route / ${o.name}: CPU ${ratioCell(o.refRatios)}`)
  }
  console.log(`- bare route / this tree: CPU ${ratioCell(refRatios)}, wall ${ratioCell(refWallRatios)}`)

  if (process.env.BENCH_PROFILE) {
    const dir = path.resolve(process.env.BENCH_PROFILE)
    fs.mkdirSync(dir, { recursive: true })
    const trees = a ? [a, b] : [b]
    const tables: Map<string, { self: number; total: number }>[] = trees.map(() => new Map())
    // Several profiles each, in turn, summed: one alone is as noisy as one round.
    const n = Number(process.env.BENCH_PROFILE_REQUESTS ?? 5000)
    for (let k = 0; k < 3; k++) {
      for (const [i, s] of trees.entries()) {
        const file = path.join(dir, `${s.name.replace(/\W+/g, '-').replace(/-$/, '')}-${k}.cpuprofile`)
        await ask(s, { profile: n, file })
        for (const [key, v] of byFunction(JSON.parse(fs.readFileSync(file, 'utf8')), n * 3)) {
          const e = tables[i].get(key) ?? { self: 0, total: 0 }
          e.self += v.self
          e.total += v.total
          tables[i].set(key, e)
        }
      }
    }
    console.log(`\nProfiles (3 of ${n} requests each, sampled every 50 µs) in ${dir}.`)
    compare(trees, tables)
  }
  for (const s of subjects) s.child.send({ close: true } satisfies Ask)
}

/** Each tree's functions by self time, and (two trees) the largest differences. */
function compare(trees: Subject[], tables: Map<string, { self: number; total: number }>[]): void {
  const row = (self: number, total: number, k: string) => `| ${self.toFixed(2)} | ${total.toFixed(2)} | ${k} |`
  trees.forEach((s, i) => {
    console.log(`\n${s.name}: the 30 functions of most self time, µs per request\n\n| self | total | function |\n|---|---|---|`)
    for (const [k, v] of [...tables[i]].sort((x, y) => y[1].self - x[1].self).slice(0, 30)) console.log(row(v.self, v.total, k))
  })
  if (trees.length !== 2) return
  const [ta, tb] = tables
  const diff = [...new Set([...ta.keys(), ...tb.keys()])].map((k) => ({ k, self: (tb.get(k)?.self ?? 0) - (ta.get(k)?.self ?? 0), total: (tb.get(k)?.total ?? 0) - (ta.get(k)?.total ?? 0) }))
  const sum = (t: Map<string, { self: number }>) => [...t.values()].reduce((n, v) => n + v.self, 0)
  console.log(`\nSampled µs per request: other tree ${sum(ta).toFixed(1)}, this tree ${sum(tb).toFixed(1)}.`)
  console.log('\nThe 30 largest differences of self time (this tree minus the other), µs per request\n\n| self | total | function |\n|---|---|---|')
  for (const d of diff.sort((x, y) => Math.abs(y.self) - Math.abs(x.self)).slice(0, 30)) console.log(row(d.self, d.total, d.k))
  console.log('\nThe 30 largest differences of total time\n\n| self | total | function |\n|---|---|---|')
  for (const d of diff.sort((x, y) => Math.abs(y.total) - Math.abs(x.total)).slice(0, 30)) console.log(row(d.self, d.total, d.k))
}

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

// Last: the functions above and their constants are defined by now.
const role = process.env.BENCH_COST_ROLE
if (role) await serve(role)
else await drive()
