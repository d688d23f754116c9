// Generates dist/validators.cjs (lib/validation.ts): the request validators of every route
// of the app as Ajv standalone code, so that no start compiles them on the event loop. Run
// by the build (scripts/build-if-stale.mjs) after tsc; builds the app once on a scratch
// data directory to learn exactly the schemas its routes hand the compiler.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { precompiledModule, recordSchemas, validatorsModule } from '../lib/validation.js'

const started = Date.now()
recordSchemas()
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-validators-'))
try {
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: 'Validators-build-1', LOG_LEVEL: 'silent' })
  const app = await buildApp({ config })
  await app.ready()
  const { code, count } = precompiledModule()
  await app.close()
  const tmp = `${validatorsModule}.${process.pid}.tmp`
  fs.writeFileSync(tmp, code)
  fs.renameSync(tmp, validatorsModule)
  console.error(`precompiled ${count} validators (${Math.round(code.length / 1024)} KiB) in ${((Date.now() - started) / 1000).toFixed(1)} s`)
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
