import type { DB } from './index.js'

export function notificationsRepo(_db: DB) {
  return {}
}
