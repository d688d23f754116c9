import type { DB } from './index.js'

export function agentlessRepo(_db: DB) {
  return {}
}
