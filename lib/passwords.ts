import crypto from 'node:crypto'
import { promisify } from 'node:util'

const scrypt = promisify(crypto.scrypt) as (pw: string, salt: Buffer, len: number, opts: crypto.ScryptOptions) => Promise<Buffer>
const N = 16384,
  r = 8,
  p = 1,
  keyLen = 32

export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(16)
  const key = await scrypt(password, salt, keyLen, { N, r, p })
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64')}$${key.toString('base64')}`
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [alg, n, rr, pp, salt, hash] = stored.split('$')
  if (alg !== 'scrypt') return false
  const expected = Buffer.from(hash, 'base64')
  const key = await scrypt(password, Buffer.from(salt, 'base64'), expected.length, { N: Number(n), r: Number(rr), p: Number(pp) })
  return crypto.timingSafeEqual(key, expected)
}

// A hash to compare against when the user does not exist, so that timing does not tell.
let dummy: Promise<string> | undefined
export const dummyHash = () => (dummy ??= hashPassword(crypto.randomBytes(16).toString('hex')))

/** The password policy; answers the reason a password is refused, or null. */
export function passwordProblem(password: string, userName: string): string | null {
  if (password.length < 12) return 'must have at least 12 characters'
  if (userName && password.toLowerCase().includes(userName.toLowerCase())) return 'must not contain the user name'
  if (/^[A-Za-z]+$/.test(password) || /^\d+$/.test(password)) return 'must not be only letters or only digits'
  return null
}

export const sha256 = (s: string) => crypto.createHash('sha256').update(s).digest('base64url')

/** A random secret with a recognisable prefix (so that leaked tokens can be found by scanners). */
export const newSecret = (prefix: string) => `${prefix}_${crypto.randomBytes(32).toString('base64url')}`
