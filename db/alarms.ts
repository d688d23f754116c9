import type { DB } from './index.js'

export function alarmsRepo(_db: DB) {
  return {}
}
