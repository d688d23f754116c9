import { setTimeout as sleep } from 'node:timers/promises'
import { loadConfig } from './config.js'
import { buildApp } from './app.js'
import { DataDirLock, DataDirRefused } from './data-dir.js'
import { stdoutLines } from './log.js'

// Whatever the server creates (the data directory, the database, its WAL, report files) is
// its user's alone; the modes are also set where each is made.
process.umask(0o077)
const config = loadConfig()
const refused = (err: unknown): never => {
  if (!(err instanceof DataDirRefused)) throw err
  // It says why and how to fix it: a stack would only hide that.
  console.error(`prime: not starting: ${err.message}`)
  process.exit(1)
}
// One server per data directory, for the process's whole life: taken before the database
// opens, released by the kernel whenever the process ends. A restore takes it too.
let lock: DataDirLock
try {
  lock = DataDirLock.take(config.dataDir, 'server')
} catch (err) {
  refused(err)
}
const logStream = stdoutLines(config.logFormat)
const app = await buildApp({ config, logStream }).catch(refused)
const drainMs = config.shutdownDrainSeconds * 1000

let stopping: number | undefined

/**
 * SIGTERM/SIGINT/SIGHUP: readiness answers 503 at once; after the drain delay (a load
 * balancer takes the node out meanwhile), stop accepting, finish in-flight requests, close
 * the database (its last connection checkpoints and removes the WAL), release the data
 * directory, and exit 0 after a last "stopped" line. An uncaught error does the same, exit 1.
 * A signal during a shutdown under way is ignored: the terminal sends Ctrl-C to the whole
 * process group (`npm run demo` included) and an orchestrator may repeat SIGTERM; the
 * shutdown's own deadline (the drain delay and 10 s) bounds it instead.
 * SIGUSR2 asks for the loop statistics when they are on (PRIME_LOOP_STATS_SECONDS), else it stops too.
 */
async function shutdown(cause: { signal?: NodeJS.Signals; err?: unknown }): Promise<void> {
  if (stopping !== undefined) {
    if (cause.err) app.log.error({ err: cause.err }, 'error while stopping')
    else app.log.info({ signal: cause.signal }, 'already stopping')
    return
  }
  stopping = Date.now()
  const { signal, err } = cause
  if (err) app.log.error({ err }, 'shutting down after an error')
  else app.log.info({ signal, drainSeconds: config.shutdownDrainSeconds }, 'shutting down')
  // Seen at once, not with the next block of request lines.
  logStream.flush()
  // A shutdown that hangs (a request that never ends) still ends the process.
  const deadline = setTimeout(() => {
    app.log.error({ seconds: (drainMs + 10_000) / 1000 }, 'stopped: the shutdown did not finish in time')
    process.exit(1)
  }, drainMs + 10_000)
  let code = err ? 1 : 0
  try {
    app.lifecycle.shuttingDown = true
    if (!err && drainMs > 0) await sleep(drainMs)
    await app.close()
  } catch (closeErr) {
    app.log.error({ err: closeErr }, 'error while stopping')
    code = 1
  }
  lock.release()
  clearTimeout(deadline)
  app.log.info({ seconds: Math.round(Date.now() - stopping) / 1000 }, 'stopped')
  process.exit(code)
}

const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', ...(config.loopStatsSeconds > 0 ? [] : (['SIGUSR2'] as const))]
for (const signal of signals) process.on(signal, () => void shutdown({ signal }))
process.on('uncaughtException', (err) => void shutdown({ err }))
process.on('unhandledRejection', (err) => void shutdown({ err }))

// The start line names where to go: the API's address and its documentation page.
await app.listen({ host: config.host, port: config.port, listenTextResolver: (address) => `Server listening at ${address}; documentation page ${address}/prime/webui/docs` })
