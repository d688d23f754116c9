// Secrets at rest (agentless connections' credentials, webhook secrets and header values):
// AES-256-GCM with a key kept outside the database (a copied database file alone reveals
// none of them). The key comes from
// PRIME_AGENTLESS_KEY (32 bytes, base64 or hex) or from the file `agentless-key` in the
// data dir, created with mode 0600 on the first start.
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'

export interface Credentials {
  password: string | null
  privateKey: string | null
  privateKeyPassphrase: string | null
}

const VERSION = 1
const IV_BYTES = 12
const TAG_BYTES = 16

function decodeKey(raw: string, source: string): Buffer {
  const text = raw.trim()
  const key = /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64')
  if (key.length !== 32) throw new Error(`${source} must hold a 32-byte key, as 64 hex digits or base64`)
  return key
}

/** The key: from the environment, or kept in the data dir (generated once). */
export function loadKey(env: NodeJS.ProcessEnv, dataDir: string): Buffer {
  if (env.PRIME_AGENTLESS_KEY) return decodeKey(env.PRIME_AGENTLESS_KEY, 'PRIME_AGENTLESS_KEY')
  const file = path.join(dataDir, 'agentless-key')
  try {
    return decodeKey(fs.readFileSync(file, 'utf8'), file)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  const key = crypto.randomBytes(32)
  fs.writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
  return key
}

/**
 * Seals and opens values with the key. `context` is bound in as associated data (the record
 * a value belongs to), so that a sealed value copied onto another record does not open there.
 */
export function vault(key: Buffer) {
  const sealValue = (value: unknown, context: string): Buffer => {
    const iv = crypto.randomBytes(IV_BYTES)
    const cipher = crypto.createCipheriv('aes-256-gcm', key, iv)
    cipher.setAAD(Buffer.from(context))
    const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()])
    return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body])
  }
  /** Throws when the value was sealed with another key, for another context, or altered. */
  const openValue = (sealed: Buffer, context: string): unknown => {
    if (sealed[0] !== VERSION) throw new Error('unknown sealed value format')
    const iv = sealed.subarray(1, 1 + IV_BYTES)
    const tag = sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES)
    const decipher = crypto.createDecipheriv('aes-256-gcm', key, iv)
    decipher.setAAD(Buffer.from(context))
    decipher.setAuthTag(tag)
    return JSON.parse(Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8'))
  }
  return {
    sealValue,
    openValue,
    /** A connection's credentials. */
    seal: (c: Credentials, connectionId: number): Buffer => sealValue(c, `agentless:${connectionId}`),
    /** Throws when the value was sealed with another key or altered. */
    open(sealed: Buffer, connectionId: number): Credentials {
      const c = openValue(sealed, `agentless:${connectionId}`) as Partial<Credentials>
      return { password: c.password ?? null, privateKey: c.privateKey ?? null, privateKeyPassphrase: c.privateKeyPassphrase ?? null }
    },
  }
}
export type Vault = ReturnType<typeof vault>
