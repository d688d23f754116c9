import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import closeWithGrace from 'close-with-grace'
import { loadConfig } from './config.js'
import { buildApp } from './app.js'
import { PID_FILE } from './backup.js'
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
const drainMs = config.shutdownDrainSeconds * 1000
// Marks the data directory as in use: a restore refuses to write into it meanwhile.
const pidFile = path.join(config.dataDir, PID_FILE)
fs.writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 })

// SIGTERM/SIGINT: readiness answers 503 at once; after the drain delay (a load balancer
// takes the node out meanwhile), stop accepting, finish in-flight requests, close the database.
// SIGUSR2 asks for the loop statistics when they are on (PRIME_LOOP_STATS_SECONDS), not a shutdown.
closeWithGrace({ delay: drainMs + 10_000, skip: config.loopStatsSeconds > 0 ? ['SIGUSR2'] : [] }, async ({ signal, err }) => {
  if (err) app.log.error({ err }, 'shutting down after an error')
  else app.log.info({ signal, drainSeconds: config.shutdownDrainSeconds }, 'shutting down')
  app.lifecycle.shuttingDown = true
  if (!err && drainMs > 0) await sleep(drainMs)
  await app.close()
  fs.rmSync(pidFile, { force: true })
})

await app.listen({ host: config.host, port: config.port })
