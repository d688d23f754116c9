// The rules every agentless connection obeys, whichever way it arrives (POST, PUT, a CSV
// row): each field on its own, then the fields together, then the credentials to store.
import type { ConnectionRow, ConnectionValues, Protocol } from './ports.js'
import type { Credentials } from '../vault.js'
import { addressProblem } from './address.js'

/** A connection as asked for: the result of applying a request to what is stored. */
export interface Draft {
  name: string
  address: string
  protocol: string
  /** null: the protocol's default. */
  port: number | null
  /** null: the protocol's default (HTTPS for WinRM). */
  useTls: boolean | null
  userName: string
  /** New secrets given (undefined: not given, keep the stored ones). */
  password?: string | null
  privateKey?: string | null
  /** undefined: not given; null: remove. */
  privateKeyPassphrase?: string | null
  isOverrideDefaults: boolean
  pollingIntervalSeconds: number | null
  timeoutSeconds: number | null
  pollerId: string | null
}

export interface RuleError {
  field: string
  reason: string
}

export interface Checked {
  values: ConnectionValues
  /** The credentials to store; undefined when the stored ones stay as they are. */
  credentials?: Credentials
  credentialType: 'Password' | 'PrivateKey'
  pollerId: string | null
}

export const LIMITS = {
  name: 128,
  address: 253,
  userName: 256,
  password: 1024,
  privateKey: 16384,
  passphrase: 1024,
  interval: [60, 86400],
  timeout: [1, 300],
  connectionsPerPoller: 10_000,
} as const

const NAME = /^[A-Za-z0-9][^\x00-\x1F\x7F]*$/
const ADDRESS = /^[A-Za-z0-9:][A-Za-z0-9.:%_-]*$/
const USER_NAME = /^[^=+@\x00-\x1F\x7F-][^\x00-\x1F\x7F]*$/
const PRIVATE_KEY = /^-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const defaultPort = (protocol: Protocol, useTls: boolean) => (protocol === 'SSH' ? 22 : useTls ? 5986 : 5985)
export const protocolOf = (text: string): Protocol | undefined => (['SSH', 'WinRM'] as const).find((p) => p.toLowerCase() === text.toLowerCase())

/**
 * Checks a draft against the rules; `stored` is the connection it changes (its
 * credentials opened), or undefined for a new one. Answers every problem found.
 */
export function checkDraft(d: Draft, stored?: { row: ConnectionRow; credentials: Credentials }): { errors: RuleError[]; checked?: Checked } {
  const errors: RuleError[] = []
  const fail = (field: string, reason: string) => errors.push({ field, reason })

  if (d.name.length < 1 || d.name.length > LIMITS.name) fail('name', `must have 1 to ${LIMITS.name} characters`)
  else if (!NAME.test(d.name)) fail('name', 'must start with a letter or digit and hold no control characters')
  if (!ADDRESS.test(d.address)) fail('address', 'must be a host name or an IP address (letters, digits and . : % _ -)')
  else {
    const problem = addressProblem(d.address)
    if (problem) fail('address', problem)
  }
  const protocol = protocolOf(d.protocol)
  if (!protocol) fail('protocol', `must be SSH or WinRM, got "${d.protocol.slice(0, 40)}"`)
  if (d.port !== null && (!Number.isInteger(d.port) || d.port < 1 || d.port > 65535)) fail('port', 'must be an integer from 1 to 65535')
  if (protocol === 'SSH' && d.useTls === true) fail('useTls', 'applies to WinRM only: leave it out or false for SSH')
  if (d.userName.length < 1 || d.userName.length > LIMITS.userName) fail('userName', `must have 1 to ${LIMITS.userName} characters`)
  else if (!USER_NAME.test(d.userName)) fail('userName', 'must not start with =, +, - or @ and hold no control characters')

  // Credentials: what is given, then what results with the stored ones.
  if (d.password != null && (d.password.length < 1 || d.password.length > LIMITS.password)) fail('password', `must have 1 to ${LIMITS.password} characters`)
  if (d.privateKey != null) {
    if (d.privateKey.length > LIMITS.privateKey) fail('privateKey', `must have at most ${LIMITS.privateKey} characters`)
    else if (!PRIVATE_KEY.test(d.privateKey)) fail('privateKey', 'must be a PEM or OpenSSH private key (-----BEGIN ... PRIVATE KEY-----)')
  }
  if (d.privateKeyPassphrase != null && (d.privateKeyPassphrase.length < 1 || d.privateKeyPassphrase.length > LIMITS.passphrase)) {
    fail('privateKeyPassphrase', `must have 1 to ${LIMITS.passphrase} characters`)
  }
  let credentials: Credentials | undefined
  let credentialType: 'Password' | 'PrivateKey' = stored?.row.credential_type ?? 'Password'
  const givesPassword = d.password != null
  const givesKey = d.privateKey != null
  if (givesPassword && givesKey) fail('privateKey', 'give a password or a private key, not both')
  else if (givesPassword) {
    credentialType = 'Password'
    if (d.privateKeyPassphrase != null) fail('privateKeyPassphrase', 'goes only with a private key')
    credentials = { password: d.password!, privateKey: null, privateKeyPassphrase: null }
  } else if (givesKey) {
    credentialType = 'PrivateKey'
    // A passphrase belongs to its key: a new key comes with its own, or none.
    credentials = { password: null, privateKey: d.privateKey!, privateKeyPassphrase: d.privateKeyPassphrase ?? null }
  } else if (!stored) {
    fail('password', 'a new connection needs a password or a private key')
  } else if (d.privateKeyPassphrase !== undefined) {
    if (stored.row.credential_type !== 'PrivateKey') {
      if (d.privateKeyPassphrase !== null) fail('privateKeyPassphrase', 'goes only with a private key, and this connection has a password')
    } else if (d.privateKeyPassphrase !== stored.credentials.privateKeyPassphrase) {
      credentials = { ...stored.credentials, privateKeyPassphrase: d.privateKeyPassphrase }
    }
  }
  if (protocol === 'WinRM' && credentialType === 'PrivateKey' && !givesPassword) {
    fail(givesKey ? 'privateKey' : 'password', givesKey ? 'WinRM takes a password, not a private key' : 'WinRM takes a password: give one to replace the stored private key')
  }

  // Polling options.
  const inRange = (field: string, v: number | null, [lo, hi]: readonly [number, number]) => {
    if (v !== null && (!Number.isInteger(v) || v < lo || v > hi)) fail(field, `must be an integer from ${lo} to ${hi}`)
  }
  inRange('pollingIntervalSeconds', d.pollingIntervalSeconds, LIMITS.interval)
  inRange('timeoutSeconds', d.timeoutSeconds, LIMITS.timeout)
  if (d.isOverrideDefaults) {
    if (d.pollingIntervalSeconds === null) fail('pollingIntervalSeconds', 'is required when isOverrideDefaults is true')
    if (d.timeoutSeconds === null) fail('timeoutSeconds', 'is required when isOverrideDefaults is true')
    if (d.pollingIntervalSeconds !== null && d.timeoutSeconds !== null && d.timeoutSeconds >= d.pollingIntervalSeconds) {
      fail('timeoutSeconds', 'must be shorter than pollingIntervalSeconds')
    }
  } else {
    if (d.pollingIntervalSeconds !== null) fail('pollingIntervalSeconds', 'must be left out unless isOverrideDefaults is true (the system default applies)')
    if (d.timeoutSeconds !== null) fail('timeoutSeconds', 'must be left out unless isOverrideDefaults is true (the system default applies)')
  }
  if (d.pollerId !== null && !UUID.test(d.pollerId)) fail('pollerId', 'must be a worker poller id (a uuid)')

  if (errors.length > 0 || !protocol) return { errors }
  const useTls = protocol === 'WinRM' && d.useTls !== false
  return {
    errors,
    checked: {
      values: {
        name: d.name,
        address: d.address,
        protocol,
        port: d.port ?? defaultPort(protocol, useTls),
        useTls,
        userName: d.userName,
        isOverrideDefaults: d.isOverrideDefaults,
        pollingIntervalSeconds: d.isOverrideDefaults ? d.pollingIntervalSeconds : null,
        timeoutSeconds: d.isOverrideDefaults ? d.timeoutSeconds : null,
      },
      credentials,
      credentialType,
      pollerId: d.pollerId === null ? null : d.pollerId.toLowerCase(),
    },
  }
}

/** The draft of a stored connection: applying a change to it starts from here. */
export function draftOf(row: ConnectionRow): Draft {
  return {
    name: row.name,
    address: row.address,
    protocol: row.protocol,
    // A port equal to the protocol's default follows the protocol when it changes.
    port: row.port === defaultPort(row.protocol, row.use_tls === 1) ? null : row.port,
    useTls: row.protocol === 'WinRM' ? row.use_tls === 1 : null,
    userName: row.user_name,
    isOverrideDefaults: row.is_override_defaults === 1,
    pollingIntervalSeconds: row.polling_interval_s,
    timeoutSeconds: row.timeout_s,
    pollerId: row.poller_id,
  }
}

/** The settings that differ between a stored connection and checked values (names as in the contract). */
export function changedFields(row: ConnectionRow, c: Checked, stored?: Credentials): string[] {
  const out: string[] = []
  const v = c.values
  if (row.name !== v.name) out.push('name')
  if (row.address !== v.address) out.push('address')
  if (row.protocol !== v.protocol) out.push('protocol')
  if (row.port !== v.port) out.push('port')
  if ((row.use_tls === 1) !== v.useTls) out.push('useTls')
  if (row.user_name !== v.userName) out.push('userName')
  if ((row.is_override_defaults === 1) !== v.isOverrideDefaults) out.push('isOverrideDefaults')
  if (row.polling_interval_s !== v.pollingIntervalSeconds) out.push('pollingIntervalSeconds')
  if (row.timeout_s !== v.timeoutSeconds) out.push('timeoutSeconds')
  if (row.poller_id !== c.pollerId) out.push('pollerId')
  if (c.credentials && stored) {
    if (c.credentials.password !== stored.password) out.push('password')
    if (c.credentials.privateKey !== stored.privateKey) out.push('privateKey')
    if (c.credentials.privateKeyPassphrase !== stored.privateKeyPassphrase) out.push('privateKeyPassphrase')
  }
  return out
}
