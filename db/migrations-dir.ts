import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/** db/migrations, found upwards from this file: it runs from the sources and from dist/db/. */
export const migrationsDir = (() => {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'db', 'migrations')
    if (fs.existsSync(candidate)) return candidate
    if (path.dirname(dir) === dir) throw new Error('db/migrations not found')
  }
})()
