import closeWithGrace from 'close-with-grace'
import { loadConfig } from './config.js'
import { buildApp } from './app.js'
import { DataDirRefused } from './data-dir.js'

// Whatever the server creates (the data directory, the database, its WAL, report files) is
// its user's alone; the modes are also set where each is made.
process.umask(0o077)
const config = loadConfig()
const app = await buildApp({ config }).catch((err: unknown) => {
  if (!(err instanceof DataDirRefused)) throw err
  // It says why and how to fix it: a stack would only hide that.
  console.error(`prime: not starting: ${err.message}`)
  process.exit(1)
})

// SIGTERM/SIGINT: stop accepting, finish in-flight requests, close the database.
closeWithGrace({ delay: 10_000 }, async ({ signal, err }) => {
  if (err) app.log.error({ err }, 'shutting down after an error')
  else app.log.info({ signal }, 'shutting down')
  await app.close()
})

await app.listen({ host: config.host, port: config.port })
