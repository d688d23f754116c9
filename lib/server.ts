import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import closeWithGrace from 'close-with-grace'
import { loadConfig } from './config.js'
import { buildApp } from './app.js'
import { PID_FILE } from './backup.js'

const config = loadConfig()
const app = await buildApp({ config })
const drainMs = config.shutdownDrainSeconds * 1000
// Marks the data directory as in use: a restore refuses to write into it meanwhile.
const pidFile = path.join(config.dataDir, PID_FILE)
fs.writeFileSync(pidFile, `${process.pid}\n`, { mode: 0o600 })

// SIGTERM/SIGINT: readiness answers 503 at once; after the drain delay (a load balancer
// takes the node out meanwhile), stop accepting, finish in-flight requests, close the database.
closeWithGrace({ delay: drainMs + 10_000 }, async ({ signal, err }) => {
  if (err) app.log.error({ err }, 'shutting down after an error')
  else app.log.info({ signal, drainSeconds: config.shutdownDrainSeconds }, 'shutting down')
  app.lifecycle.shuttingDown = true
  if (!err && drainMs > 0) await sleep(drainMs)
  await app.close()
  fs.rmSync(pidFile, { force: true })
})

await app.listen({ host: config.host, port: config.port })
