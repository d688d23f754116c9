import type { DB } from './index.js'

export function eventQueriesRepo(_db: DB) {
  return {}
}
export type EventQueriesRepoType = ReturnType<typeof eventQueriesRepo>
