import type { DB } from './index.js'

export function reportsRepo(_db: DB) {
  return {}
}
