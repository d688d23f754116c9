import fs from 'node:fs'
import path from 'node:path'
import crypto from 'node:crypto'
import { eventCodes } from './event-codes.js'
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
  /** PRIME_PG_COUNT_BUDGET_MS: how long an exact count of a text filter may run on PostgreSQL before an estimate is answered. */
  pgCountBudgetMs: number
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
  /** The in-memory caches (lib/platform/cache.ts): on or off (PRIME_CACHES), and the MiB all of them may hold together (PRIME_CACHE_MB). */
  caches: { on: boolean; maxMb: number }
  /** WAL checkpoints (lib/platform/checkpointer.ts): in a worker thread, how often, and the WAL size that restarts it. */
  wal: { checkpointThread: boolean; checkpointMs: number; restartMb: number }
  /** Seconds between the lines of event-loop delay and background slices (0: none; lib/log.ts LoopStats). */
  loopStatsSeconds: number
  /** How long a singleton loop's lease lasts without renewal where processes share a database (PostgreSQL), in seconds. */
  loopLeaseSeconds: number
  /** Fault injection for tests: each PostgreSQL unit of work waits a random time up to this many ms before its COMMIT (0: none). */
  faultCommitDelayMs: number
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

/** One setting as the operating page's table describes it (scripts/settings-table.ts writes the table). */
export interface SettingDescription {
  /** The environment variable. */
  name: string
  /** Its default, as Markdown. */
  default: string
  /** What it sets, as Markdown (links relative to docs/). */
  meaning: string
}

/**
 * Every environment variable the server reads, in the order of the table in docs/operating.md.
 * `loadConfig` below is what applies them; tests/docs-settings.test.ts fails when a variable
 * read in lib/ is missing here or when the page's table differs from this list.
 */
export const SETTINGS: readonly SettingDescription[] = [
  { name: 'HOST', default: '`127.0.0.1`', meaning: 'address to listen on (`0.0.0.0` to serve other hosts)' },
  { name: 'PORT', default: '`8080`', meaning: 'port to listen on' },
  {
    name: 'PRIME_DATA_DIR',
    default: '`./data`',
    meaning: "SQLite database (`prime.sqlite`), generated secrets, report files and archives; private to the server's user (folders 0700, files 0600, see [Security](security.md))",
  },
  { name: 'PRIME_DATABASE_URL', default: 'unset (SQLite)', meaning: 'a `postgres://` URL: run on that PostgreSQL database instead of the embedded SQLite file (see [PostgreSQL](#postgresql))' },
  { name: 'PRIME_DATABASE_POOL', default: '`10`', meaning: 'connections at most to PostgreSQL (1-1000)' },
  {
    name: 'PRIME_PG_COUNT_BUDGET_MS',
    default: '`50`',
    meaning:
      "on PostgreSQL, how long the exact count of an event, audit, agent or peripheral list filtered by text (a text filter or `GlobalSearch`) may run (0 to 600000); past it `recordsFiltered` is the planner's estimate and `recordsFilteredExact` is `false` (the rows are exact); `0`: always the estimate. An agent or peripheral count past it is not tried again on that node for a minute (the same filter is answered with the estimate at once). Filters without text are always counted exactly, as every count on SQLite is",
  },
  {
    name: 'PRIME_ADMIN_PASSWORD',
    default: 'generated, logged once',
    meaning: 'password of the `admin` account created on first start (at least 12 characters, not only letters or digits, not containing "admin")',
  },
  { name: 'PRIME_JWT_SECRET', default: 'generated into `$PRIME_DATA_DIR/jwt-secret`', meaning: 'HS256 signing secret of access tokens, at least 32 characters' },
  { name: 'PRIME_ACCESS_TOKEN_TTL', default: '`900`', meaning: 'access token lifetime, seconds' },
  { name: 'PRIME_REFRESH_TOKEN_TTL', default: '`604800`', meaning: 'refresh token lifetime, seconds' },
  { name: 'PRIME_RATE_LIMIT_MAX', default: '`1200`', meaning: 'requests per window per source address (IPv6: per /64 network)' },
  { name: 'PRIME_RATE_LIMIT_WINDOW_MS', default: '`60000`', meaning: 'rate-limit window' },
  { name: 'PRIME_LOGIN_RATE_LIMIT_MAX', default: '`20`', meaning: 'failed login attempts per minute per source address (IPv6: per /64 network); successful logins do not count' },
  { name: 'PRIME_USER_RATE_LIMIT_MAX', default: '`1200`', meaning: 'requests per window per account (all its sessions, from any address)' },
  { name: 'PRIME_TOKEN_RATE_LIMIT_MAX', default: '`1200`', meaning: 'requests per window per integration token' },
  { name: 'PRIME_AGENT_RATE_LIMIT_MAX', default: '`60`', meaning: 'agent gateway requests per window per agent' },
  { name: 'PRIME_POLLER_RATE_LIMIT_MAX', default: '`1200`', meaning: 'requests per window per worker poller' },
  { name: 'PRIME_AUDIT_REFUSAL_WINDOW_SECONDS', default: '`300`', meaning: 'repeated identical refusals within this window are one audit record plus one record with their count' },
  { name: 'PRIME_LOCKOUT_THRESHOLD', default: '`5`', meaning: 'consecutive failed logins with one user name from one source address that lock that user name from that address' },
  { name: 'PRIME_LOCKOUT_SECONDS', default: '`900`', meaning: 'how long such a lock lasts, and how long failures are remembered' },
  { name: 'PRIME_BODY_LIMIT', default: '`1048576`', meaning: 'largest request body, bytes (413 above)' },
  { name: 'PRIME_HEADERS_TIMEOUT_SECONDS', default: '`10`', meaning: "time a client has to send a request's line and headers (408 after)" },
  {
    name: 'PRIME_REQUEST_TIMEOUT_SECONDS',
    default: '`30`',
    meaning: 'time a client has to send a whole request, body and uploads included, from its first byte (408 after; at least the headers timeout); answers are not timed',
  },
  { name: 'PRIME_KEEP_ALIVE_TIMEOUT_SECONDS', default: '`10`', meaning: "an idle keep-alive connection is closed after this; behind a load balancer, set it above the balancer's idle timeout" },
  {
    name: 'PRIME_MAX_CONNECTIONS_PER_ADDRESS',
    default: '`256` (`0` with `PRIME_TRUST_PROXY`)',
    meaning:
      'connections one source address (IPv6: one /64 network) may hold open at once; more are closed as they are accepted; `0`: no cap. Agents behind one NAT share an address: allow about agents × keep-alive seconds ÷ check-in seconds',
  },
  { name: 'PRIME_TRUST_PROXY', default: '`false`', meaning: "take the client address from `X-Forwarded-For`, and a well-formed `x-request-id` as the request's id (only behind a proxy you run)" },
  { name: 'PRIME_LICENSE_ACCOUNT', default: '`Prime`', meaning: 'licensed account name shown at login' },
  { name: 'PRIME_LICENSE_SEATS', default: '`1000`', meaning: 'agents the license allows' },
  { name: 'PRIME_LICENSE_EXPIRES', default: 'none', meaning: 'license expiry date (ISO 8601)' },
  { name: 'PRIME_LICENSE_ACCOUNT_ID', default: 'none', meaning: 'the license account agents are installed for; an agent reporting another one gets license status `Invalid` (none: any is accepted)' },
  {
    name: 'PRIME_AGENT_ENROLLMENT_SECRET',
    default: 'generated into `$PRIME_DATA_DIR/agent-enrollment-secret`, logged once',
    meaning: 'the secret agents present to enroll (`gateway/enroll`), at least 16 characters',
  },
  { name: 'PRIME_AGENT_CHECKIN_SECONDS', default: '`60`', meaning: 'check-in interval given to agents (5 to 3600)' },
  { name: 'PRIME_AGENT_MIN_CHECKIN_SECONDS', default: '`5`', meaning: 'an agent checking in again sooner gets 429; `0` turns the rule off (tests, benchmarks)' },
  { name: 'PRIME_AGENT_ENROLL_PER_MINUTE_PER_ADDRESS', default: '`300`', meaning: 'agent enrollments per minute from one source address (IPv6: per /64 network), accepted or not' },
  { name: 'PRIME_AGENT_ENROLL_PER_MINUTE', default: '`1200`', meaning: 'agent enrollments per minute to the server' },
  { name: 'PRIME_AGENT_RESULT_BYTES_PER_DAY', default: '`33554432`', meaning: 'bytes of command results (`gateway/commandresults` bodies) one agent may send per UTC day' },
  { name: 'PRIME_AGENT_DISCONNECT_SECONDS', default: '`180`', meaning: `an agent without a check-in for this long becomes \`Disconnected\` (event \`${eventCodes.disconnected.code}\`)` },
  {
    name: 'PRIME_GROUP_COMMIT',
    default: '`true`',
    meaning:
      'check-ins and command results that arrive in the same turn of the event loop share one transaction and one commit (each in a savepoint of its own: a failing one is undone alone; check-ins of different agents are compared and written together, and if that fails each runs again alone); every agent is answered only once the shared commit is on disk. `false`: one commit per call',
  },
  { name: 'PRIME_PUBLIC_ADDRESS', default: 'none', meaning: "this server's address as agents reach it (`centralizedConsoleIP`)" },
  { name: 'PRIME_UNCOMMON_PERIPHERAL_MAX_HOSTS', default: '`2`', meaning: 'a peripheral model on at most this many agents is "uncommon" (risk insights) and a `Rare Device` (asset discovery)' },
  {
    name: 'PRIME_READER_THREADS',
    default: '`2`',
    meaning:
      'reader threads for expensive reads (asset discovery, streamed agent and peripheral pages, event and audit exports in a computed order), each with a read-only connection of its own, off the event loop; `0` reads them on the event loop (no budget can stop them there). (SQLite)',
  },
  {
    name: 'PRIME_READ_DEADLINE_SECONDS',
    default: '`30`',
    meaning:
      "an expensive read's time budget: past it the read is stopped inside SQLite (on PostgreSQL: by the `statement_timeout` of the expensive reads' connections) and answered 422 (`query-too-costly`); also the longest it waits for a thread or connection (then 503)",
  },
  { name: 'PRIME_READER_QUEUE', default: '`32`', meaning: 'expensive reads that may wait for a thread; beyond, 503 (`readers-busy`) with `Retry-After`' },
  {
    name: 'PRIME_EXPENSIVE_PER_CREDENTIAL',
    default: '`1`',
    meaning:
      'expensive reads one account, token or address may have running or waiting; beyond, 429 (`expensive-in-flight`) with `Retry-After`, so that one client cannot take every thread (SQLite; on PostgreSQL the expensive reads have a pool of their own, half of `PRIME_DATABASE_POOL`)',
  },
  { name: 'PRIME_NEW_ASSET_HOURS', default: '`24`', meaning: 'asset discovery: an asset first seen within this many hours counts as new (`transformerDataApi/assetsOverview`)' },
  {
    name: 'PRIME_GRAPHQL_INTROSPECTION',
    default: '`off`',
    meaning:
      '`on`: `POST /sepio-data` answers introspection (`__schema`, `__type`) and its error messages suggest names ("Did you mean ...?"), for developing a client against it; `off`: introspection is refused (400) and suggestions are removed, so that any User or token cannot read the schema by guessing',
  },
  {
    name: 'PRIME_KEPT_LIST_ANSWERS',
    default: '`64`',
    meaning:
      "agent and peripheral list pages (up to 200 rows) whose ids and counts are kept while the data is unchanged (check-in times aside; rows are read again, so they are current), so that a repeated query skips its count; and as many pages of events and audit records (answers up to 256 KiB) kept as text until a record is added or pruned, so that a repeated question (a console's default page, a quiet feed) reads no row; `0` keeps none",
  },
  {
    name: 'PRIME_CACHES',
    default: '`on`',
    meaning:
      "the server's in-memory caches (kept list answers, verified tokens, the event engine's kept stretches and ids...; `GET /prime/webui/system/caches` lists them); `off`: none keeps anything and every answer is computed from the database, which must give the same answers, only slower",
  },
  {
    name: 'PRIME_CACHE_MB',
    default: '`208`',
    meaning:
      'MiB all in-memory caches together may hold (estimated); past it the least recently used entries of any cache go first. Each cache has its own bound too; the default is the sum of theirs on SQLite (201 MiB) rounded up, so it acts only when set lower',
  },
  {
    name: 'PRIME_DB_CACHE_MB',
    default: '`16`',
    meaning: "SQLite's page cache of the server's database connection, in MiB (1-4096); it stays resident once filled, and the operating system's file cache holds the rest of the file",
  },
  {
    name: 'PRIME_WAL_CHECKPOINT_THREAD',
    default: '`true`',
    meaning:
      "WAL checkpoints (copying the write-ahead log back into the database file) are made by a thread of their own, started at once on a database file of 64 MB or more and otherwise once the WAL passes 4 MB, instead of inside the commit of whichever request crosses SQLite's automatic checkpoint (which held that request and every other one up for tens to hundreds of ms); `false`: SQLite's own, every 10,000 pages",
  },
  { name: 'PRIME_WAL_CHECKPOINT_MS', default: '`500`', meaning: 'how often that thread checkpoints (10 to 60000 ms)' },
  {
    name: 'PRIME_WAL_RESTART_MB',
    default: '`16`',
    meaning:
      'once the WAL holds more than this (1 to 1024 MiB) and all of it is copied, the thread has it written again from its start; while writes go on without a pause, the commit that takes the WAL past this size copies what the thread has not copied yet and the WAL is written again from its start, so that under a long burst of writes it stays below about this size plus what is written during one checkpoint; a WAL file above 64 MB (after a long reader such as the integrity check) is truncated instead',
  },
  {
    name: 'PRIME_SMTP_URL',
    default: 'none',
    meaning:
      'outgoing mail for alarm e-mails and reports: `smtp://user:pass@host:587` (STARTTLS when offered) or `smtps://...:465`; without it e-mail destinations cannot be saved and reports are only stored',
  },
  { name: 'PRIME_SMTP_FROM', default: '`Prime <prime@localhost>`', meaning: 'sender of alarm and report e-mails' },
  { name: 'PRIME_PUBLIC_URL', default: 'none', meaning: "the console's address, linked from alarm e-mails" },
  {
    name: 'PRIME_ALARM_ALLOWED_HOSTS',
    default: 'none',
    meaning:
      'host names, addresses or CIDR ranges (comma-separated) that alarm destinations may reach despite the loopback rule (and the private rule below); link-local and cloud metadata addresses are never reachable',
  },
  {
    name: 'PRIME_ALARM_DENY_PRIVATE',
    default: '`false`',
    meaning: '`true`: alarm destinations may reach private addresses (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) only when listed in `PRIME_ALARM_ALLOWED_HOSTS`',
  },
  { name: 'PRIME_ALARM_TIMEOUT_SECONDS', default: '`10`', meaning: 'how long an alarm receiver has to answer (1 to 60); an unreachable receiver is reported only after this time, whatever the cause' },
  { name: 'PRIME_HEALTH_CHECK_SECONDS', default: '`60`', meaning: 'interval of the health checks that open and resolve system-health notifications (5 to 86400)' },
  { name: 'PRIME_POLLER_ENROLLMENT_SECRET', default: 'none (registration disabled)', meaning: 'the secret worker pollers present to register, 16 to 256 characters' },
  { name: 'PRIME_POLLER_HEARTBEAT_SECONDS', default: '`60`', meaning: `heartbeat interval given to pollers; a poller missing three is offline (event \`${eventCodes.pollerOffline.code}\`)` },
  { name: 'PRIME_AGENTLESS_INTERVAL_SECONDS', default: '`300`', meaning: 'default check interval of agentless connections (60 to 86400)' },
  { name: 'PRIME_AGENTLESS_TIMEOUT_SECONDS', default: '`10`', meaning: 'default check timeout (1 to 300, below the interval)' },
  {
    name: 'PRIME_AGENTLESS_KEY',
    default: 'generated into `$PRIME_DATA_DIR/agentless-key` (mode 0600)',
    meaning:
      '32-byte key (64 hex digits or base64) sealing agentless credentials and webhook secrets and header values (AES-256-GCM); keep it with backups, they do not open without it (webhook deliveries then fail, saying so, until the destination is saved again)',
  },
  { name: 'PRIME_BUILD', default: '`dev`', meaning: 'build identifier shown by `admin/PrimeVersion`' },
  {
    name: 'PRIME_SHUTDOWN_DRAIN_SECONDS',
    default: '`0`',
    meaning:
      'after `SIGTERM`/`SIGINT`, `/readyz` answers 503 for this long before the server stops accepting connections (behind a load balancer: at least its probe interval times its failure threshold)',
  },
  { name: 'PRIME_RETENTION_EVENTS_DAYS', default: '`365`', meaning: 'events older than this are archived, then deleted (`0`: kept for ever)' },
  { name: 'PRIME_RETENTION_AUDIT_DAYS', default: '`365`', meaning: 'audit records older than this are archived, then deleted (`0`: kept for ever)' },
  { name: 'PRIME_RETENTION_DELIVERY_DAYS', default: '`30`', meaning: 'finished alarm deliveries, their attempts and asset-feed messages are kept this long (1 at least)' },
  { name: 'PRIME_RETENTION_NOTIFICATIONS_DAYS', default: '`90`', meaning: 'dismissed risk notifications and resolved health notifications are kept this long; open ones always stay' },
  { name: 'PRIME_RETENTION_COMMANDS_DAYS', default: '`90`', meaning: 'finished agent commands, fetched debug logs and agent-reported errors are kept this long' },
  { name: 'PRIME_RETENTION_AGENTLESS_RUNS_DAYS', default: '`30`', meaning: 'agentless check runs are kept this long (beyond the per-connection limit they already have)' },
  { name: 'PRIME_RETENTION_ARCHIVE_DAYS', default: '`0`', meaning: 'archive files whose day is older than this are deleted (`0`: archives are kept; move them off the machine yourself)' },
  {
    name: 'PRIME_RETENTION_INTERVAL_SECONDS',
    default: '`3600`',
    meaning: 'how often the retention job runs (the first run a minute after the start); `0`: never on its own (run `npm run retention` from a scheduler)',
  },
  { name: 'PRIME_LOG_ROUTINE_SECONDS', default: '`60`', meaning: 'unchanged agent check-ins are counted into one log line per this many seconds; `0` writes a line for each' },
  {
    name: 'PRIME_LOOP_STATS_SECONDS',
    default: '`0`',
    meaning:
      'every this many seconds, and whenever the process receives `SIGUSR2`, a log line `"msg":"event loop"` says how long the event loop kept work waiting since the last one (`delayMs`: p50, p99, max, sampled every 10 ms) and what each background loop did (slices and the longest, checkpoints); `0`: no lines and no signal handler',
  },
  {
    name: 'PRIME_LOOP_LEASE_SECONDS',
    default: '`15`',
    meaning:
      'on PostgreSQL, how long the lease of a loop that one process at a time runs (the sweeper, retention, the agentless sweep, health checks) lasts without renewal: another process takes the loop over at most this long after its holder dies (1-300)',
  },
  {
    name: 'PRIME_LOG_FORMAT',
    default: '`auto`',
    meaning: '`auto`: readable lines (`10:04:05.123 INFO  message  key=value`) when standard output is a terminal, JSON lines otherwise; `pretty` or `json` to choose. In JSON, `time` is ISO 8601 UTC',
  },
  {
    name: 'PRIME_FAULT_COMMIT_DELAY_MS',
    default: '`0`',
    meaning:
      'for tests only: on PostgreSQL, each unit of work waits a random time up to this many ms (0-10000) before its COMMIT, holding its locks, so that transactions of several nodes commit in a shuffled order; `0`: no wait. Never set it in production',
  },
  { name: 'NO_COLOR', default: 'unset', meaning: 'set (to anything): readable log lines on a terminal carry no colours (the no-color.org convention)' },
  { name: 'LOG_LEVEL', default: '`info`', meaning: '`fatal`, `error`, `warn`, `info`, `debug`, `trace`, `silent`' },
]

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got "${raw}"`)
  }
  return n
}

/** Seconds between retention runs: 10 to 86400, or 0 for none on a timer (runs come from `npm run retention` under a scheduler of the operator's). */
function retentionInterval(env: NodeJS.ProcessEnv): number {
  const n = int(env, 'PRIME_RETENTION_INTERVAL_SECONDS', 3600, 0, 86_400)
  if (n > 0 && n < 10) throw new Error(`PRIME_RETENTION_INTERVAL_SECONDS must be 0 (no runs on a timer) or from 10 to 86400, got "${n}"`)
  return n
}

/** Settings of agentless checking (each with a safe default); the platform reads them, lib/agentless/ uses them. */
export interface AgentlessSettings {
  /** What pollers present to register; null: registration is disabled. */
  enrollmentSecret: string | null
  heartbeatSeconds: number
  /** A poller without a heartbeat for this long is Offline (three heartbeats). */
  offlineAfterSeconds: number
  /** Polling options of connections that do not override them. */
  defaultIntervalSeconds: number
  defaultTimeoutSeconds: number
}

export function agentlessSettings(env: NodeJS.ProcessEnv = process.env): AgentlessSettings {
  const secret = env.PRIME_POLLER_ENROLLMENT_SECRET || null
  if (secret !== null && (secret.length < 16 || secret.length > 256)) throw new Error('PRIME_POLLER_ENROLLMENT_SECRET must have 16 to 256 characters')
  const heartbeatSeconds = int(env, 'PRIME_POLLER_HEARTBEAT_SECONDS', 60, 1, 3600)
  const defaultIntervalSeconds = int(env, 'PRIME_AGENTLESS_INTERVAL_SECONDS', 300, 60, 86400)
  const defaultTimeoutSeconds = int(env, 'PRIME_AGENTLESS_TIMEOUT_SECONDS', 10, 1, 300)
  if (defaultTimeoutSeconds >= defaultIntervalSeconds) throw new Error('PRIME_AGENTLESS_TIMEOUT_SECONDS must be below PRIME_AGENTLESS_INTERVAL_SECONDS')
  return { enrollmentSecret: secret, heartbeatSeconds, offlineAfterSeconds: heartbeatSeconds * 3, defaultIntervalSeconds, defaultTimeoutSeconds }
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
    pgCountBudgetMs: int(env, 'PRIME_PG_COUNT_BUDGET_MS', 50, 0, 600_000),
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
    caches: { on: bool(env, 'PRIME_CACHES', true), maxMb: int(env, 'PRIME_CACHE_MB', 208, 1, 65_536) },
    wal: {
      checkpointThread: bool(env, 'PRIME_WAL_CHECKPOINT_THREAD', true),
      checkpointMs: int(env, 'PRIME_WAL_CHECKPOINT_MS', 500, 10, 60_000),
      restartMb: int(env, 'PRIME_WAL_RESTART_MB', 16, 1, 1024),
    },
    loopStatsSeconds: int(env, 'PRIME_LOOP_STATS_SECONDS', 0, 0, 86_400),
    loopLeaseSeconds: int(env, 'PRIME_LOOP_LEASE_SECONDS', 15, 1, 300),
    faultCommitDelayMs: int(env, 'PRIME_FAULT_COMMIT_DELAY_MS', 0, 0, 10_000),
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
      intervalSeconds: retentionInterval(env),
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
