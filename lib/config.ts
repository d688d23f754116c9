import fs from 'node:fs'
import path from 'node:path'
import crypto from 'node:crypto'
import { agentlessSettings, type AgentlessSettings } from './agentless/settings.js'
import { loadKey } from './vault.js'

export interface Config {
  host: string
  port: number
  dataDir: string
  dbFile: string
  /** PRIME_DATABASE_URL: a PostgreSQL server instead of the embedded SQLite file. */
  databaseUrl: string | undefined
  /** Connections at most to PostgreSQL (PRIME_DATABASE_POOL). */
  databasePool: number
  /**
   * With PostgreSQL, the secrets the settings do not give are shared through the database
   * (lib/platform/storage.ts fills them in when it opens it), never generated per node.
   */
  secretsFromDatabase: ('jwt' | 'enrollment' | 'agentless')[]
  adminPassword: string | undefined
  jwtSecret: string
  accessTokenTtlSec: number
  refreshTokenTtlSec: number
  rateLimitMax: number
  rateLimitWindowMs: number
  loginRateLimitMax: number
  /** Requests per rate-limit window per credential, by kind (whatever the address). */
  credentialRateLimits: { user: number; token: number; agent: number; poller: number }
  /** Repeated identical refusals within this many seconds are one audit record with a count. */
  auditRefusalWindowSeconds: number
  lockoutThreshold: number
  lockoutMs: number
  bodyLimit: number
  logLevel: string
  /** How the server's log is written: `pretty` lines for people, `json` lines with ISO times, or `auto` (pretty on a terminal). */
  logFormat: 'auto' | 'pretty' | 'json'
  /** Routine agent check-ins are summarised in one log line per this many seconds (0: a line each). */
  logRoutineSeconds: number
  trustProxy: boolean
  build: string
  /** List answers kept while the database is unchanged (0: none). */
  keptListAnswers: number
  /** SQLite's page cache of the server's connection, in MiB (PRIME_DB_CACHE_MB). */
  dbCacheMb: number
  /** WAL checkpoints (lib/platform/checkpointer.ts): in a worker thread, how often, and the WAL size that restarts it. */
  wal: { checkpointThread: boolean; checkpointMs: number; restartMb: number }
  /** Seconds between the lines of event-loop delay and background slices (0: none; lib/log.ts LoopStats). */
  loopStatsSeconds: number
  /** `accountId`: agents reporting another license account are `Invalid` (null: any is accepted). */
  license: { accountName: string; accountId: string | null; seats: number; expirationDate: string | null }
  agents: {
    /** The secret agents present to enroll; `generated` when it was made on this start. */
    enrollmentSecret: string
    enrollmentSecretGenerated: boolean
    checkInSeconds: number
    /** Check-ins closer together than this answer 429 (0: no minimum, for benchmarks). */
    minCheckInSeconds: number
    /** Enrollments per minute, per source address and overall. */
    enrollPerMinutePerAddress: number
    enrollPerMinute: number
    /** Bytes of command results one agent may send per day (UTC). */
    resultBytesPerDay: number
    disconnectSeconds: number
    uncommonPeripheralMaxHosts: number
    /** This server's address as agents reach it (`centralizedConsoleIP`). */
    publicAddress: string | null
    /** Check-ins and command results arriving together share one commit (db/unit-of-work.ts runGrouped). */
    groupCommit: boolean
  }
  /** Seconds between the periodic health checks that open and resolve health notifications. */
  healthCheckSeconds: number
  /** The console's address, linked from alarm and report e-mails (null: no link). */
  publicUrl: string | null
  /** Outgoing mail for alarm e-mails and reports (`url` null: mail is not configured). */
  smtp: { url: string | null; from: string }
  /** Worker pollers and agentless checking. */
  agentless: AgentlessSettings
  /** The reader threads of expensive reads (lib/platform/readers.ts). */
  readers: { threads: number; queue: number; deadlineMs: number; perCredential: number }
  /** Asset discovery: an asset first seen within this many hours counts as new. */
  assets: { newHours: number }
  /** GraphQL (`POST /sepio-data`) answers introspection and suggests names in its errors (PRIME_GRAPHQL_INTROSPECTION; off by default). */
  graphqlIntrospection: boolean
  /** The key that seals agentless connection credentials (PRIME_AGENTLESS_KEY or kept in the data dir). */
  agentlessKey: Buffer
  /** Days each kind of record is kept (0: for ever), and the retention job's pace (lib/retention/job.ts). */
  retention: {
    eventsDays: number
    auditDays: number
    deliveryDays: number
    notificationsDays: number
    commandsDays: number
    agentlessRunsDays: number
    archiveDays: number
    /** Seconds between runs of the retention job. */
    intervalSeconds: number
  }
  /** Seconds between the start of a shutdown (readiness answers 503) and the server's closing. */
  shutdownDrainSeconds: number
  alarms: {
    /** Host names, addresses or CIDR ranges that alarm destinations may reach despite the loopback rule. */
    allowedHosts: string[]
    /** Private addresses (RFC 1918, 100.64/10, fc00::/7) only through allowedHosts. */
    denyPrivate: boolean
    /** How long a receiver has to answer; an unreachable one is reported after this time. */
    timeoutMs: number
  }
  /** What one client may hold of the HTTP server: time to send a request, idle keep-alive, connections. */
  connections: {
    headersTimeoutMs: number
    /** Receiving the whole request (headers and body); answers may take longer. */
    requestTimeoutMs: number
    keepAliveTimeoutMs: number
    /** Open connections per source address (IPv6: per /64 network); 0: no cap. */
    maxPerAddress: number
  }
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got "${raw}"`)
  }
  return n
}

/**
 * The default of a per-credential or enrollment budget: its own, or PRIME_RATE_LIMIT_MAX when
 * that is set higher, so that the one setting benchmarks and tests raise lifts them all.
 */
function lifted(env: NodeJS.ProcessEnv, fallback: number): number {
  const general = Number(env.PRIME_RATE_LIMIT_MAX)
  return Number.isInteger(general) && general > fallback ? general : fallback
}

function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (/^(1|true|yes|on)$/i.test(raw)) return true
  if (/^(0|false|no|off)$/i.test(raw)) return false
  throw new Error(`${name} must be true or false (on or off), got "${raw}"`)
}

function logFormat(env: NodeJS.ProcessEnv): Config['logFormat'] {
  const raw = env.PRIME_LOG_FORMAT || 'auto'
  if (raw === 'auto' || raw === 'pretty' || raw === 'json') return raw
  throw new Error(`PRIME_LOG_FORMAT must be auto, pretty or json, got "${raw}"`)
}

// The JWT secret is generated once and kept in the data dir, so tokens survive restarts
// without the operator having to invent a secret.
function jwtSecret(env: NodeJS.ProcessEnv, dataDir: string): string {
  if (env.PRIME_JWT_SECRET) {
    if (env.PRIME_JWT_SECRET.length < 32) throw new Error('PRIME_JWT_SECRET must be at least 32 characters')
    return env.PRIME_JWT_SECRET
  }
  const file = path.join(dataDir, 'jwt-secret')
  try {
    const kept = fs.readFileSync(file, 'utf8').trim()
    if (kept.length < 32) throw new Error(`${file} must hold a secret of at least 32 characters (delete it to have one generated)`)
    return kept
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  const secret = crypto.randomBytes(48).toString('base64url')
  fs.writeFileSync(file, secret + '\n', { mode: 0o600, flag: 'wx' })
  return secret
}

// Like the JWT secret: generated once into the data dir; the caller logs it on the start
// that generated it, so that the operator can install agents.
function enrollmentSecret(env: NodeJS.ProcessEnv, dataDir: string): { secret: string; generated: boolean } {
  if (env.PRIME_AGENT_ENROLLMENT_SECRET) {
    if (env.PRIME_AGENT_ENROLLMENT_SECRET.length < 16) throw new Error('PRIME_AGENT_ENROLLMENT_SECRET must be at least 16 characters')
    return { secret: env.PRIME_AGENT_ENROLLMENT_SECRET, generated: false }
  }
  const file = path.join(dataDir, 'agent-enrollment-secret')
  try {
    const kept = fs.readFileSync(file, 'utf8').trim()
    if (kept.length < 16) throw new Error(`${file} must hold a secret of at least 16 characters (delete it to have one generated)`)
    return { secret: kept, generated: false }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  const secret = 'pes_' + crypto.randomBytes(24).toString('base64url')
  fs.writeFileSync(file, secret + '\n', { mode: 0o600, flag: 'wx' })
  return { secret, generated: true }
}

/** PRIME_DATABASE_URL, when set: a postgres:// (or postgresql://) URL, or the start fails saying why. */
function databaseUrl(env: NodeJS.ProcessEnv): string | undefined {
  const url = env.PRIME_DATABASE_URL || undefined
  if (url !== undefined && !/^postgres(ql)?:\/\/./i.test(url)) throw new Error('PRIME_DATABASE_URL must be a postgres:// URL (without it, the server uses its embedded SQLite file)')
  return url
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const dataDir = path.resolve(env.PRIME_DATA_DIR || './data')
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const expiration = env.PRIME_LICENSE_EXPIRES || null
  const url = databaseUrl(env)
  const fromDatabase: Config['secretsFromDatabase'] = []
  if (url && !env.PRIME_JWT_SECRET) fromDatabase.push('jwt')
  if (url && !env.PRIME_AGENT_ENROLLMENT_SECRET) fromDatabase.push('enrollment')
  if (url && !env.PRIME_AGENTLESS_KEY) fromDatabase.push('agentless')
  const enrollment = fromDatabase.includes('enrollment') ? { secret: '', generated: false } : enrollmentSecret(env, dataDir)
  if (expiration !== null && Number.isNaN(Date.parse(expiration))) {
    throw new Error(`PRIME_LICENSE_EXPIRES must be a date, got "${expiration}"`)
  }
  return {
    host: env.HOST || '127.0.0.1',
    port: int(env, 'PORT', 8080, 0, 65535),
    dataDir,
    dbFile: path.join(dataDir, 'prime.sqlite'),
    databaseUrl: url,
    databasePool: int(env, 'PRIME_DATABASE_POOL', 10, 1, 1000),
    secretsFromDatabase: fromDatabase,
    adminPassword: env.PRIME_ADMIN_PASSWORD || undefined,
    jwtSecret: fromDatabase.includes('jwt') ? '' : jwtSecret(env, dataDir),
    accessTokenTtlSec: int(env, 'PRIME_ACCESS_TOKEN_TTL', 900, 60, 86400),
    refreshTokenTtlSec: int(env, 'PRIME_REFRESH_TOKEN_TTL', 7 * 86400, 300, 90 * 86400),
    rateLimitMax: int(env, 'PRIME_RATE_LIMIT_MAX', 1200, 1, 100_000_000),
    rateLimitWindowMs: int(env, 'PRIME_RATE_LIMIT_WINDOW_MS', 60_000, 1000, 3_600_000),
    loginRateLimitMax: int(env, 'PRIME_LOGIN_RATE_LIMIT_MAX', 20, 1, 100_000),
    credentialRateLimits: {
      user: int(env, 'PRIME_USER_RATE_LIMIT_MAX', lifted(env, 1200), 1, 100_000_000),
      token: int(env, 'PRIME_TOKEN_RATE_LIMIT_MAX', lifted(env, 1200), 1, 100_000_000),
      agent: int(env, 'PRIME_AGENT_RATE_LIMIT_MAX', lifted(env, 60), 1, 100_000_000),
      poller: int(env, 'PRIME_POLLER_RATE_LIMIT_MAX', lifted(env, 1200), 1, 100_000_000),
    },
    auditRefusalWindowSeconds: int(env, 'PRIME_AUDIT_REFUSAL_WINDOW_SECONDS', 300, 1, 86_400),
    lockoutThreshold: int(env, 'PRIME_LOCKOUT_THRESHOLD', 5, 1, 1000),
    lockoutMs: int(env, 'PRIME_LOCKOUT_SECONDS', 900, 1, 86400) * 1000,
    bodyLimit: int(env, 'PRIME_BODY_LIMIT', 1024 * 1024, 1024, 100 * 1024 * 1024),
    logLevel: env.LOG_LEVEL || 'info',
    logFormat: logFormat(env),
    logRoutineSeconds: int(env, 'PRIME_LOG_ROUTINE_SECONDS', 60, 0, 3600),
    trustProxy: bool(env, 'PRIME_TRUST_PROXY', false),
    build: env.PRIME_BUILD || 'dev',
    keptListAnswers: int(env, 'PRIME_KEPT_LIST_ANSWERS', 64, 0, 10_000),
    dbCacheMb: int(env, 'PRIME_DB_CACHE_MB', 16, 1, 4096),
    wal: {
      checkpointThread: bool(env, 'PRIME_WAL_CHECKPOINT_THREAD', true),
      checkpointMs: int(env, 'PRIME_WAL_CHECKPOINT_MS', 500, 10, 60_000),
      restartMb: int(env, 'PRIME_WAL_RESTART_MB', 16, 1, 1024),
    },
    loopStatsSeconds: int(env, 'PRIME_LOOP_STATS_SECONDS', 0, 0, 86_400),
    license: {
      accountName: env.PRIME_LICENSE_ACCOUNT || 'Prime',
      accountId: env.PRIME_LICENSE_ACCOUNT_ID || null,
      seats: int(env, 'PRIME_LICENSE_SEATS', 1000, 0, 10_000_000),
      expirationDate: expiration === null ? null : new Date(expiration).toISOString(),
    },
    agents: {
      enrollmentSecret: enrollment.secret,
      enrollmentSecretGenerated: enrollment.generated,
      checkInSeconds: int(env, 'PRIME_AGENT_CHECKIN_SECONDS', 60, 5, 3600),
      minCheckInSeconds: int(env, 'PRIME_AGENT_MIN_CHECKIN_SECONDS', 5, 0, 3600),
      enrollPerMinutePerAddress: int(env, 'PRIME_AGENT_ENROLL_PER_MINUTE_PER_ADDRESS', lifted(env, 300), 1, 100_000_000),
      enrollPerMinute: int(env, 'PRIME_AGENT_ENROLL_PER_MINUTE', lifted(env, 1200), 1, 100_000_000),
      resultBytesPerDay: int(env, 'PRIME_AGENT_RESULT_BYTES_PER_DAY', 32 * 1024 * 1024, 1024, 1024 * 1024 * 1024 * 1024),
      disconnectSeconds: int(env, 'PRIME_AGENT_DISCONNECT_SECONDS', 180, 10, 86400),
      uncommonPeripheralMaxHosts: int(env, 'PRIME_UNCOMMON_PERIPHERAL_MAX_HOSTS', 2, 1, 1_000_000),
      publicAddress: env.PRIME_PUBLIC_ADDRESS || null,
      groupCommit: bool(env, 'PRIME_GROUP_COMMIT', true),
    },
    healthCheckSeconds: int(env, 'PRIME_HEALTH_CHECK_SECONDS', 60, 5, 86_400),
    publicUrl: httpUrl(env, 'PRIME_PUBLIC_URL'),
    smtp: { url: smtpUrl(env), from: env.PRIME_SMTP_FROM || 'Prime <prime@localhost>' },
    agentless: agentlessSettings(env),
    readers: {
      threads: int(env, 'PRIME_READER_THREADS', 2, 0, 64),
      queue: int(env, 'PRIME_READER_QUEUE', 32, 0, 10_000),
      deadlineMs: int(env, 'PRIME_READ_DEADLINE_SECONDS', 30, 1, 3600) * 1000,
      perCredential: int(env, 'PRIME_EXPENSIVE_PER_CREDENTIAL', 1, 1, 1000),
    },
    assets: { newHours: int(env, 'PRIME_NEW_ASSET_HOURS', 24, 1, 8760) },
    graphqlIntrospection: bool(env, 'PRIME_GRAPHQL_INTROSPECTION', false),
    agentlessKey: fromDatabase.includes('agentless') ? Buffer.alloc(0) : loadKey(env, dataDir),
    retention: {
      eventsDays: int(env, 'PRIME_RETENTION_EVENTS_DAYS', 365, 0, 36_500),
      auditDays: int(env, 'PRIME_RETENTION_AUDIT_DAYS', 365, 0, 36_500),
      deliveryDays: int(env, 'PRIME_RETENTION_DELIVERY_DAYS', 30, 1, 36_500),
      notificationsDays: int(env, 'PRIME_RETENTION_NOTIFICATIONS_DAYS', 90, 0, 36_500),
      commandsDays: int(env, 'PRIME_RETENTION_COMMANDS_DAYS', 90, 0, 36_500),
      agentlessRunsDays: int(env, 'PRIME_RETENTION_AGENTLESS_RUNS_DAYS', 30, 0, 36_500),
      archiveDays: int(env, 'PRIME_RETENTION_ARCHIVE_DAYS', 0, 0, 36_500),
      intervalSeconds: int(env, 'PRIME_RETENTION_INTERVAL_SECONDS', 3600, 10, 86_400),
    },
    shutdownDrainSeconds: int(env, 'PRIME_SHUTDOWN_DRAIN_SECONDS', 0, 0, 300),
    alarms: {
      allowedHosts: (env.PRIME_ALARM_ALLOWED_HOSTS || '')
        .split(',')
        .map((h) => h.trim())
        .filter(Boolean),
      denyPrivate: bool(env, 'PRIME_ALARM_DENY_PRIVATE', false),
      timeoutMs: int(env, 'PRIME_ALARM_TIMEOUT_SECONDS', 10, 1, 60) * 1000,
    },
    connections: connectionLimits(env),
  }
}

function connectionLimits(env: NodeJS.ProcessEnv): Config['connections'] {
  const headers = int(env, 'PRIME_HEADERS_TIMEOUT_SECONDS', 10, 1, 3600)
  const request = int(env, 'PRIME_REQUEST_TIMEOUT_SECONDS', 30, 1, 3600)
  if (headers > request) throw new Error(`PRIME_HEADERS_TIMEOUT_SECONDS (${headers}) must not exceed PRIME_REQUEST_TIMEOUT_SECONDS (${request})`)
  return {
    headersTimeoutMs: headers * 1000,
    requestTimeoutMs: request * 1000,
    keepAliveTimeoutMs: int(env, 'PRIME_KEEP_ALIVE_TIMEOUT_SECONDS', 10, 1, 3600) * 1000,
    // Behind a proxy every connection comes from the proxy: no cap unless one is set.
    maxPerAddress: int(env, 'PRIME_MAX_CONNECTIONS_PER_ADDRESS', bool(env, 'PRIME_TRUST_PROXY', false) ? 0 : 256, 0, 1_000_000),
  }
}

function httpUrl(env: NodeJS.ProcessEnv, name: string): string | null {
  const raw = env[name]
  if (!raw) return null
  if (!/^https?:\/\/[^\s]+$/i.test(raw) || !URL.canParse(raw)) throw new Error(`${name} must be an http(s) URL, got "${raw}"`)
  return raw.replace(/\/+$/, '')
}

// smtp://user:pass@host:port (STARTTLS when offered) or smtps:// (TLS from the start).
function smtpUrl(env: NodeJS.ProcessEnv): string | null {
  const raw = env.PRIME_SMTP_URL
  if (!raw) return null
  if (!/^smtps?:\/\//i.test(raw) || !URL.canParse(raw)) throw new Error('PRIME_SMTP_URL must be an smtp:// or smtps:// URL')
  return raw
}
