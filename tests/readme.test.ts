// backend: sqlite-only — the documentation's examples run `npm run demo`, the default embedded SQLite file
// The documentation's examples, run as a new user runs them: `npm run demo` (the server and
// simulated agents, on 127.0.0.1 with a data dir of its own), then every fenced block
// marked `<!-- readme-test: run -->` in README.md and docs/*.md, in the order the README's
// table of contents gives the pages, in one bash session with job control (as a terminal
// has), exactly as written but for the ports. Each command must succeed and no answer may
// be a 4xx/5xx (curl runs with --fail-with-body), so no page can drift from the service.
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

/** The blocks of `page` marked runnable, with the line each starts on; `name` names the page in errors. */
export function runnableBlocks(page: string, name = 'README.md'): { line: number; code: string }[] {
  const lines = page.split('\n')
  const blocks: { line: number; code: string }[] = []
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== MARK) continue
    if (!/^```(sh|bash)\s*$/.test(lines[i + 1] ?? '')) throw new Error(`${name} line ${i + 1}: ${MARK} must be followed by a \`\`\`sh block`)
    const start = i + 2
    let end = start
    while (end < lines.length && lines[end] !== '```') end++
    if (end === lines.length) throw new Error(`${name} line ${i + 2}: the block never ends`)
    blocks.push({ line: start + 1, code: lines.slice(start, end).join('\n') })
    i = end
  }
  return blocks
}

/**
 * The pages whose examples run, in order: README.md (it logs in), then docs/*.md in the
 * order the README first links them, then any other page of docs/ by name.
 */
export function examplePages(root = projectRoot): string[] {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
  const docs = fs
    .readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`)
    .sort()
  const linked = [...readme.matchAll(/\]\((docs\/[^)#\s]+\.md)(?:#[^)]*)?\)/g)].map((m) => m[1])
  return [...new Set(['README.md', ...linked.filter((p) => docs.includes(p)), ...docs])]
}

t.test('the runnable blocks of every page are found, and a malformed mark is an error', async (t) => {
  const pages = examplePages()
  t.equal(pages[0], 'README.md', 'the README runs first: it logs in')
  for (const p of ['docs/api.md', 'docs/events.md', 'docs/reports.md']) t.ok(pages.includes(p), `${p} is a page whose examples run`)
  t.ok(pages.indexOf('docs/api.md') < pages.indexOf('docs/events.md'), 'in the order of the table of contents')
  t.throws(() => runnableBlocks(`x\n${MARK}\n\`\`\`ts\nlet a\n\`\`\`\n`, 'docs/x.md'), /docs\/x\.md line 2: .* must be followed by a ```sh block/)
  t.throws(() => runnableBlocks(`${MARK}\n\`\`\`sh\necho\n`, 'docs/x.md'), /docs\/x\.md line 2: the block never ends/)
  t.same(runnableBlocks(`a\n${MARK}\n\`\`\`sh\necho 1\necho 2\n\`\`\`\n\`\`\`sh\nnot marked\n\`\`\`\n`), [{ line: 4, code: 'echo 1\necho 2' }])
})

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

t.test('every runnable block of every page works, in order, against npm run demo', async (t) => {
  const blocks = examplePages().flatMap((page) => runnableBlocks(fs.readFileSync(path.join(projectRoot, page), 'utf8'), page).map((b) => ({ page, ...b })))
  t.ok(blocks.length >= 7, `${blocks.length} runnable blocks`)
  for (const page of ['README.md', 'docs/api.md', 'docs/events.md', 'docs/reports.md'])
    t.ok(
      blocks.some((b) => b.page === page),
      `${page} has runnable blocks`,
    )

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

  // The pages say to run from the repository root; the downloads land in `work` instead,
  // and an npm that runs the repository's scripts from there stands in for that (a program,
  // not a shell function, so that `kill %1` reaches npm as it does in a terminal).
  const bin = path.join(dir, 'bin')
  fs.mkdirSync(bin)
  const realNpm = spawnSync('bash', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim()
  fs.writeFileSync(path.join(bin, 'npm'), `#!/bin/sh\nexec ${JSON.stringify(realNpm)} --prefix ${JSON.stringify(projectRoot)} "$@"\n`, { mode: 0o755 })
  const script = [
    // Job control as in a terminal: a background job is a process group of its own, which `kill %1` ends whole.
    'set -m',
    'set -eo pipefail',
    // A job an example leaves running (a failure before its `kill %1`) ends with the session.
    "trap 'for j in $(jobs -p); do kill -- -$j 2>/dev/null; done' EXIT",
    `cd ${JSON.stringify(work)}`,
    `PATH=${JSON.stringify(bin)}:$PATH`,
    // Every answer must be a success: a 4xx/5xx fails the command.
    'curl() { command curl --fail-with-body --max-time 60 "$@"; }',
    'trap \'echo "README command failed (status $?): $BASH_COMMAND" >&2\' ERR',
    ...blocks.map((b) => `echo "=== ${b.page} line ${b.line}"\n${b.code.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`).replaceAll('127.0.0.1:9000', `127.0.0.1:${receiverPort}`)}`),
    'sleep 1',
    // What the examples started, they also stopped.
    `if command curl -s --max-time 5 -o /dev/null http://127.0.0.1:${receiverPort}/; then echo "the receiver still listens"; else echo "the receiver stopped"; fi`,
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
  t.match(out, 'the receiver stopped', 'kill %1, as the example says, stopped the receiver')
})
