// The server's log as people and tools read it (lib/log.ts, lib/server.ts): JSON lines with
// ISO times when standard output is not a terminal, readable lines on a terminal (or with
// PRIME_LOG_FORMAT=pretty); the start line names the URL and the documentation page; a
// generated password is printed once, plainly; the last line says the server stopped.
import { spawn } from 'node:child_process'
import path from 'node:path'
import t from 'tap'
import { loadConfig } from '../lib/config.js'
import { PrettyLines, prettyLine, resolveLogFormat } from '../lib/log.js'
import { freePort } from './fixtures/receivers.js'
import { testDatabaseEnv } from './helpers.js'
import { jsonLines, serverJs, start, tempDir, until } from './fixtures/processes.js'

t.setTimeout(180_000)

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const PRETTY = /^\d\d:\d\d:\d\d\.\d{3} (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) /

/** The server with a generated admin password, until it listens; then SIGTERM, and its whole output. */
async function run(t: Parameters<Parameters<typeof t.test>[1]>[0], env: Record<string, string>) {
  // Teardowns run last-registered first: the server is stopped before its database is dropped.
  const database = await testDatabaseEnv(t)
  const root = tempDir(t)
  const port = await freePort()
  const proc = start(
    t,
    [serverJs],
    { PRIME_DATA_DIR: path.join(root, 'data'), PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', PRIME_ADMIN_PASSWORD: '', ...database, ...env },
    path.join(root, 'out'),
  )
  let code: number | null | undefined
  void proc.exited.then((c) => (code = c))
  await until(() => /Server listening/.test(proc.output()) || code !== undefined, 'the server to listen', 60_000)
  if (code !== undefined) throw new Error(`the server exited with ${code}: ${proc.output()}`)
  await (await fetch(`http://127.0.0.1:${port}/prime/webui/agents`)).arrayBuffer()
  proc.child.kill('SIGTERM')
  t.equal(await proc.exited, 0, 'stopped with status 0')
  return { text: proc.output(), port }
}

t.test('not a terminal: JSON lines with ISO times', async (t) => {
  const { text, port } = await run(t, {})
  const lines = jsonLines(text)
  t.equal(lines.length, text.trim().split('\n').length, 'every line is JSON')
  for (const l of lines) t.match(l.time, ISO, `time is ISO 8601: ${l.msg}`)
  const url = `http://127.0.0.1:${port}`
  t.ok(
    lines.some((l) => l.msg === `Server listening at ${url}; documentation page ${url}/prime/webui/docs`),
    'the start line names the URL and the documentation page',
  )
  t.equal(lines.filter((l) => l.level === 40 && /^Created account "admin" with the generated password: \S+ /.test(l.msg)).length, 1, 'the generated password: once, in its warn line')
  t.match(
    lines.find((l) => l.msg === 'request'),
    { method: 'GET', url: '/prime/webui/agents', statusCode: 401, time: ISO },
    'request lines too',
  )
  t.match(lines.at(-1), { level: 30, msg: 'stopped' }, 'the last line says it stopped')
})

t.test('PRIME_LOG_FORMAT=pretty: lines for people', async (t) => {
  const { text, port } = await run(t, { PRIME_LOG_FORMAT: 'pretty' })
  const lines = text.trimEnd().split('\n')
  for (const l of lines) t.match(l, PRETTY, 'time, level, message')
  const url = `http://127.0.0.1:${port}`
  t.ok(lines.some((l) => l.endsWith(`INFO  Server listening at ${url}; documentation page ${url}/prime/webui/docs`)))
  const password = lines.filter((l) => /WARN {2}Created account "admin" with the generated password: [\w-]+ {2}\(change it/.test(l))
  t.equal(password.length, 1, 'the password, once and plainly')
  t.ok(
    lines.some((l) => /INFO {2}GET \/prime\/webui\/agents 401 [\d.]+ ms {2}reqId=\S+$/.test(l)),
    'a request line reads as one',
  )
  t.match(lines.at(-1), /INFO {2}stopped {2}seconds=[\d.]+$/, 'the last line says it stopped')
})

t.test('on a terminal: pretty by default, and Ctrl-C typed there stops it with status 0', async (t) => {
  const database = await testDatabaseEnv(t)
  const root = tempDir(t)
  const port = await freePort()
  // script(1) (util-linux) runs the server on a pseudo-terminal; a ^C written to it is the terminal's Ctrl-C.
  // It runs the command through $SHELL -c, and the shell is in the terminal's process group too: `exec`
  // leaves the server alone there, or a dash (SHELL unset, as under CI) would itself end 130 on the ^C.
  const { NO_COLOR: _, ...env } = process.env
  const child = spawn('script', ['-qefc', `exec ${process.execPath} ${serverJs}`, '/dev/null'], {
    env: { ...env, PRIME_DATA_DIR: path.join(root, 'data'), PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', PRIME_ADMIN_PASSWORD: '', PRIME_LOG_FORMAT: '', ...database },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  t.teardown(() => child.kill('SIGKILL'))
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  let code: number | null | undefined
  void exited.then((c) => (code = c))
  await until(() => /Server listening/.test(out) || code !== undefined, 'the server to listen', 60_000)
  if (code !== undefined) throw new Error(`the server exited with ${code}: ${out}`)
  child.stdin.write('\x03')
  t.equal(await exited, 0, 'status 0')
  const lines = out
    .replace(/\x1b\[\d+m/g, '')
    .replace(/^\^C/m, '')
    .trimEnd()
    .split(/\r?\n/)
  for (const l of lines) t.match(l, PRETTY)
  t.match(out, /\x1b\[33mWARN /, 'levels in colour')
  t.match(lines.at(-1), /INFO {2}stopped/)
})

t.test('prettyLine and the format setting', async (t) => {
  t.equal(resolveLogFormat('auto', true), 'pretty')
  t.equal(resolveLogFormat('auto', false), 'json')
  t.equal(resolveLogFormat('json', true), 'json')
  t.equal(loadConfig({ PRIME_DATA_DIR: tempDir(t) }).logFormat, 'auto')
  t.throws(() => loadConfig({ PRIME_DATA_DIR: tempDir(t), PRIME_LOG_FORMAT: 'xml' }), /PRIME_LOG_FORMAT must be auto, pretty or json, got "xml"/)

  const at = new Date(2026, 0, 2, 3, 4, 5, 6).toISOString()
  t.equal(prettyLine(JSON.stringify({ level: 30, time: at, pid: 1, hostname: 'h', a: 'x y', b: 2, c: 'plain', msg: 'hello' })), `03:04:05.006 INFO  hello  a="x y" b=2 c=plain\n`)
  const err = new Error('boom')
  const withErr = prettyLine(JSON.stringify({ level: 50, time: at, err: { type: 'Error', message: 'boom', stack: err.stack }, msg: 'failed' }))
  t.match(withErr, /^03:04:05\.006 ERROR failed\n {4}Error: boom\n +at /, 'an error with its stack below')
  t.equal(prettyLine('not json'), 'not json\n', 'anything else as it is')
  t.equal(prettyLine(JSON.stringify({ level: 40, time: at, msg: 'w' }), { color: true }), '03:04:05.006 \x1b[33mWARN \x1b[0m w\n')

  const written: string[] = []
  const lines = new PrettyLines({ write: (s: string) => written.push(s), flushSync: () => {} })
  lines.write(`${JSON.stringify({ level: 30, time: at, msg: 'one' })}\n{"level":30,"ti`)
  lines.write(`me":"${at}","msg":"two"}\n`)
  t.same(written, ['03:04:05.006 INFO  one\n', '03:04:05.006 INFO  two\n'], 'a line split between writes is written whole')
})
