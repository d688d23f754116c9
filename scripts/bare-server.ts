// The comparison points of the benchmark: bare Fastify routes, no platform layers.
// /bare/<name> serves fixed JSON; /wire/<name> serves it with the headers the API's answer
// carried (security, rate-limit and request-id headers, fixed values); /data/<name> does the
// same data work as the API (the same repository read and mapping) on the same database,
// without authentication, validation, limits, headers or logging. On the next port,
// /logged/<name> serves the JSON with those headers from a Fastify that logs as the API
// does (a pino logger, one request line per request, to a file): what every answer costs
// that has the request logs and headers the platform requires, and nothing else of it.
import fs from 'node:fs'
import path from 'node:path'
import Fastify, { LogController } from 'fastify'
import pino from 'pino'
import { LineBatcher, lazyChildLogger, logTimestamp, requestLineWriter } from '../lib/log.js'
import { openDatabase } from '../db/index.js'
import { createRepos } from '../lib/repos.js'
import { accountView } from '../lib/accounts/views.js'

const [, , port, dbFile, ...files] = process.argv
const app = Fastify({ logger: false })
const lines = new LineBatcher(pino.destination({ dest: path.join(path.dirname(dbFile), 'bare-requests.log'), sync: true }))
// The API's time format too (ISO 8601, made once a millisecond), not pino's epoch milliseconds.
const logged = Fastify({ logger: { level: 'info', stream: lines, timestamp: logTimestamp }, logController: new LogController({ disableRequestLogging: true }), childLoggerFactory: lazyChildLogger })
const requestLine = requestLineWriter(logged.log)
logged.addHook('onResponse', (req, reply, done) => {
  requestLine(req, reply)
  done()
})
for (const file of files) {
  const { url, body, headers } = JSON.parse(fs.readFileSync(file, 'utf8'))
  app.get(url, async () => body)
  app.get(url.replace(/^\/bare\//, '/wire/'), async (_req, reply) => reply.headers(headers).send(body))
  logged.get(url.replace(/^\/bare\//, '/logged/'), async (_req, reply) => reply.headers(headers).send(body))
}
const db = openDatabase(dbFile)
const { users } = createRepos(db)
const adminId = users.byName('admin')!.id
app.get('/data/getuserdetails', async () => accountView(users.account(adminId)!))
app.get('/data/all', async () => users.all().map(accountView))
await app.listen({ host: '127.0.0.1', port: Number(port) })
await logged.listen({ host: '127.0.0.1', port: Number(port) + 1 })
process.stdout.write('listening\n')
