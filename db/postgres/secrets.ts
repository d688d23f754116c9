// The shared secrets on PostgreSQL (table `secrets`, migration 001): one value per name for
// every node, made by whichever node asks first.
import type { Postgres } from './connection.js'

/** The secret `name`, made with `make()` when no node has made it yet; `made`: this call made it. */
export async function sharedSecret(db: Postgres, name: string, make: () => string): Promise<{ value: string; made: boolean }> {
  const inserted = await db.value<string>('INSERT INTO secrets (name, value, created_ms) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING RETURNING value', [name, make(), Date.now()])
  if (inserted !== undefined) return { value: inserted, made: true }
  const kept = await db.value<string>('SELECT value FROM secrets WHERE name = $1', [name])
  if (kept === undefined) throw new Error(`the shared secret ${name} could not be read`)
  return { value: kept, made: false }
}
