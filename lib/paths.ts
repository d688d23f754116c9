import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

// The code runs from the sources (tests) and from dist/ (production): find the
// project root by its package.json rather than by a fixed relative path.
function findRoot(start: string): string {
  let dir = start
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'spec'))) return dir
    const parent = path.dirname(dir)
    if (parent === dir) throw new Error('project root not found from ' + start)
    dir = parent
  }
}

export const projectRoot = findRoot(path.dirname(fileURLToPath(import.meta.url)))
export const specPath = path.join(projectRoot, 'spec', 'openapi.yaml')
export { migrationsDir } from '../db/migrations-dir.js'
