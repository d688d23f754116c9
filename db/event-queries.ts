import type { DB } from './index.js'

export function eventQueriesRepo(_db: DB) {
  return {}
}
