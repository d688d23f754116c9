// The comparison points of the benchmark: bare Fastify routes, no platform layers.
// /bare/<name> serves fixed JSON; /wire/<name> serves it with the headers the API's answer
// carried (security, rate-limit and request-id headers, fixed values); /data/<name> does the
// same data work as the API (the same repository read and mapping) on the same database,
// without authentication, validation, limits, headers or logging.
import fs from 'node:fs'
import Fastify from 'fastify'
import { openDatabase } from '../db/index.js'
import { createRepos } from '../lib/repos.js'
import { accountView } from '../lib/accounts.js'

const [, , port, dbFile, ...files] = process.argv
const app = Fastify({ logger: false })
for (const file of files) {
  const { url, body, headers } = JSON.parse(fs.readFileSync(file, 'utf8'))
  app.get(url, async () => body)
  app.get(url.replace(/^\/bare\//, '/wire/'), async (_req, reply) => reply.headers(headers).send(body))
}
const db = openDatabase(dbFile)
const { users } = createRepos(db)
const adminId = users.byName('admin')!.id
app.get('/data/getuserdetails', async () => accountView(users.account(adminId)!))
app.get('/data/all', async () => users.all().map(accountView))
await app.listen({ host: '127.0.0.1', port: Number(port) })
process.stdout.write('listening\n')
