import closeWithGrace from 'close-with-grace'
import { loadConfig } from './config.js'
import { buildApp } from './app.js'

const config = loadConfig()
const app = await buildApp({ config })

// SIGTERM/SIGINT: stop accepting, finish in-flight requests, close the database.
closeWithGrace({ delay: 10_000 }, async ({ signal, err }) => {
  if (err) app.log.error({ err }, 'shutting down after an error')
  else app.log.info({ signal }, 'shutting down')
  await app.close()
})

await app.listen({ host: config.host, port: config.port })
