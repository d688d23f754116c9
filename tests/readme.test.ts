// backend: sqlite-only — the README's examples run `npm run demo`, the default embedded SQLite file
// The README's examples, run as a new user runs them: `npm run demo` (the server and
// simulated agents, on 127.0.0.1 with a data dir of its own), then every fenced block
// marked `<!-- readme-test: run -->`, in order, in one bash session, exactly as written
// but for the ports. Each command must succeed and no answer may be a 4xx/5xx (curl runs
// with --fail-with-body), so the README cannot drift from the service.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../lib/paths.js'
import { freePort } from './fixtures/receivers.js'

// Compiling (when dist/ is stale), the demo's start and the blocks take a while on a busy machine.
t.setTimeout(900_000)

const MARK = '<!-- readme-test: run -->'

/** The blocks marked runnable, with the README line each starts on. */
export function runnableBlocks(readme: string): { line: number; code: string }[] {
  const lines = readme.split('\n')
  const blocks: { line: number; code: string }[] = []
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== MARK) continue
    if (!/^```(sh|bash)\s*$/.test(lines[i + 1] ?? '')) throw new Error(`README line ${i + 1}: ${MARK} must be followed by a \`\`\`sh block`)
    const start = i + 2
    let end = start
    while (end < lines.length && lines[end] !== '```') end++
    if (end === lines.length) throw new Error(`README line ${i + 2}: the block never ends`)
    blocks.push({ line: start + 1, code: lines.slice(start, end).join('\n') })
    i = end
  }
  return blocks
}

function waitForOutput(child: ChildProcess, out: () => string, pattern: RegExp, ms: number): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`no ${pattern} within ${ms} ms: ${out().slice(-2000)}`)), ms)
    const poll = setInterval(() => {
      const m = pattern.exec(out())
      if (m) done(null, m)
    }, 50)
    const exit = (code: number | null) => done(new Error(`exited ${code}: ${out().slice(-2000)}`))
    child.once('exit', exit)
    function done(err: Error | null, m?: RegExpExecArray) {
      clearTimeout(timer)
      clearInterval(poll)
      child.off('exit', exit)
      if (err) reject(err)
      else resolve(m!)
    }
  })
}

t.test('every runnable README block works, in order, against npm run demo', async (t) => {
  const blocks = runnableBlocks(fs.readFileSync(path.join(projectRoot, 'README.md'), 'utf8'))
  t.ok(blocks.length >= 6, `${blocks.length} runnable blocks`)

  // As npm start does: compiled when a source is newer than dist/.
  const built = spawnSync(process.execPath, [path.join(projectRoot, 'scripts', 'build-if-stale.mjs')], { encoding: 'utf8' })
  t.equal(built.status, 0, `built (${built.stderr.slice(-500)})`)

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-readme-'))
  const work = path.join(dir, 'work')
  fs.mkdirSync(work)
  const port = await freePort()
  const receiverPort = await freePort()
  const children: ChildProcess[] = []
  t.teardown(async () => {
    for (const c of children) {
      // The bash session's own group: its background receiver goes with it.
      try {
        process.kill(-c.pid!, 'SIGTERM')
      } catch {
        /* gone */
      }
    }
    await new Promise((r) => setTimeout(r, 500))
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 })
  })

  // npm run demo, as the README says (the built script, so that the test controls its process).
  let demoOut = ''
  const env = { ...process.env, LOG_LEVEL: 'info', PRIME_ADMIN_PASSWORD: '', PORT: '', PRIME_RATE_LIMIT_MAX: '100000', PRIME_AGENT_MIN_CHECKIN_SECONDS: '0' }
  const demo = spawn(process.execPath, [path.join(projectRoot, 'dist', 'scripts', 'demo.js'), '--port', String(port), '--agents', '12', '--data-dir', path.join(dir, 'data')], {
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.push(demo)
  demo.stdout!.on('data', (c) => (demoOut += c))
  demo.stderr!.on('data', (c) => (demoOut += c))
  const [, password] = await waitForOutput(demo, () => demoOut, /password +(\S+)\n/, 180_000)
  t.match(demoOut, `http://127.0.0.1:${port}/prime/webui/docs`, 'the demo prints the docs page')
  t.match(demoOut, /user +admin/, 'and the user')
  await waitForOutput(demo, () => demoOut, /agents 12\/12 enrolled/, 120_000)

  const script = [
    'set -eo pipefail',
    `cd ${JSON.stringify(work)}`,
    // Every answer must be a success: a 4xx/5xx fails the command.
    'curl() { command curl --fail-with-body --max-time 60 "$@"; }',
    `npm() { command npm --prefix ${JSON.stringify(projectRoot)} "$@"; }`,
    'trap \'echo "README command failed (status $?): $BASH_COMMAND" >&2\' ERR',
    ...blocks.map((b) => `echo "=== README line ${b.line}"\n${b.code.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`).replaceAll('127.0.0.1:9000', `127.0.0.1:${receiverPort}`)}`),
    'sleep 1',
    'echo "=== all blocks done"',
  ].join('\n')
  let out = ''
  const bash = spawn('bash', ['-c', script], { env: { ...process.env, PASSWORD: password }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(bash)
  bash.stdout!.on('data', (c) => (out += c))
  bash.stderr!.on('data', (c) => (out += c))
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      try {
        process.kill(-bash.pid!, 'SIGKILL')
      } catch {
        /* gone */
      }
    }, 600_000)
    bash.once('exit', (c) => {
      clearTimeout(timer)
      resolve(c)
    })
  })
  t.equal(code, 0, `every command succeeded:\n${out.slice(-4000)}`)
  t.match(out, '=== all blocks done')
  t.notMatch(out, /login failed|README command failed/)

  const files = fs.readdirSync(work)
  t.ok(
    files.some((f) => /\.csv$/i.test(f) && /agent/i.test(f)),
    `the agents export was saved (${files.join(', ')})`,
  )
  t.ok(
    files.some((f) => /\.pdf$/i.test(f) && /event/i.test(f)),
    'the events PDF was saved',
  )
  t.ok(
    files.some((f) => /weekly.fleet.*\.pdf$/i.test(f)),
    'the report file was saved',
  )
  t.match(out, /#\d+ \S+ POST \/hook delivery \S+ \(signature verified\)/, 'the receiver printed the test delivery, signature checked')
  t.match(out, /E-mail is not configured/, 'the report warned that mail is not configured')
})
