// Report runs on PostgreSQL (db/postgres/reports.ts composes them): the queue, the leases
// on running runs, their e-mail, and their files kept in the database in parts, so that any
// node serves them.
import type { RunRow } from '../../lib/reports/ports.js'
import type { Postgres } from './connection.js'

/** A stored file's parts are at most this long. */
export const FILE_PART_BYTES = 1024 * 1024
/** How long a process's lease on a run lasts unless renewed (the scheduler renews it every 10 seconds). */
export const RUN_LEASE_MS = 60_000
const RUN_LEASE = 'report-run:'

const RUN_COLUMNS = 'id, report_id, trigger, requested_by, due_ms, queued_ms, definition, format'

/** A run's stored file: its media type, size and how many parts hold it. */
export interface StoredFileHead {
  media_type: string
  size_bytes: number
  parts: number
}

type RunInsert = Pick<RunRow, 'id' | 'report_id' | 'trigger' | 'requested_by' | 'due_ms' | 'queued_ms' | 'definition' | 'format'>
type RunSuccess = Pick<RunRow, 'id' | 'finished_ms' | 'file_name' | 'file_path' | 'size_bytes' | 'row_count' | 'truncated' | 'email_status' | 'email_next_ms' | 'email_detail'>
type RunMail = Pick<RunRow, 'id' | 'email_status' | 'email_detail' | 'email_attempts' | 'email_next_ms'>
type Health = { reports: number; active: number; runs_failed: number; mail_failed: number; mail_partial: number; mail_retrying: number; overdue_before: number | null }
type Failure = { name: string; reason: string | null; email_detail: string | null; email_status: string; status: string }

/** Cuts a stream of chunks into parts of exactly `size` bytes (the last one shorter). */
async function* partsOf(content: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, size: number): AsyncGenerator<Buffer> {
  let held: Buffer[] = []
  let length = 0
  for await (const chunk of content) {
    let buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    while (length + buf.length >= size) {
      const take = size - length
      held.push(buf.subarray(0, take))
      yield Buffer.concat(held)
      buf = buf.subarray(take)
      held = []
      length = 0
    }
    if (buf.length) {
      // Copied: the caller may reuse its chunk's memory once it has been handed over.
      held.push(Buffer.from(buf))
      length += buf.length
    }
  }
  if (length) yield Buffer.concat(held)
}

/** The runs of reports; `holder`: who holds this process's leases on runs. */
export function pgReportRuns(db: Postgres, holder: string) {
  // Rows typed as the SQLite repository's (the same columns).
  const all = <T>(sql: string, params?: unknown[]) => db.query(sql, params) as Promise<unknown> as Promise<T[]>
  const get = <T>(sql: string, params?: unknown[]) => db.one(sql, params) as Promise<unknown> as Promise<T | undefined>
  const runs = {
    // ---- runs ----
    async insertRun(r: RunInsert) {
      const changes = await db.run(`INSERT INTO report_runs (${RUN_COLUMNS}, status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued')`, [
        r.id,
        r.report_id,
        r.trigger,
        r.requested_by,
        r.due_ms,
        r.queued_ms,
        r.definition,
        r.format,
      ])
      return { changes }
    },
    runById: (id: string) => get<RunRow>('SELECT * FROM report_runs WHERE id = $1', [id]),
    runsOf: (reportId: string, limit: number) => all<RunRow>('SELECT * FROM report_runs WHERE report_id = $1 ORDER BY seq DESC LIMIT $2', [reportId, limit]),
    async lastRuns(): Promise<Map<string, RunRow>> {
      const rows = await all<RunRow>('SELECT * FROM (SELECT DISTINCT ON (report_id) * FROM report_runs ORDER BY report_id, seq DESC) last ORDER BY seq')
      return new Map(rows.map((r) => [r.report_id, r]))
    },
    lastRunOf: (reportId: string) => get<RunRow>('SELECT * FROM report_runs WHERE report_id = $1 ORDER BY seq DESC LIMIT 1', [reportId]),
    openRunOf: (reportId: string) => get<RunRow>("SELECT * FROM report_runs WHERE report_id = $1 AND status IN ('queued', 'running') ORDER BY seq LIMIT 1", [reportId]),
    queued: (limit: number) => all<RunRow>("SELECT * FROM report_runs WHERE status = 'queued' ORDER BY seq LIMIT $1", [limit]),
    /** Marks a queued run running: of several nodes starting it, one wins, and holds a lease on it (in the same statement). */
    start: async (id: string, now: number) =>
      (await db.value<number>(
        `WITH s AS (UPDATE report_runs SET status = 'running', started_ms = $1 WHERE id = $2 AND status = 'queued' RETURNING id),
              l AS (INSERT INTO leases (name, holder, fence, expires_at) SELECT $4 || id, $3, 1, now() + $5 * interval '1 millisecond' FROM s
                    ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, fence = leases.fence + 1, expires_at = EXCLUDED.expires_at)
         SELECT count(*) FROM s`,
        [now, id, holder, RUN_LEASE, RUN_LEASE_MS],
      )) === 1,
    requeue: async (id: string) => (await db.run("UPDATE report_runs SET status = 'queued', started_ms = NULL WHERE id = $1 AND status = 'running'", [id])) === 1,
    /** Runs left `running` by a server that stopped without finishing them (every node's: see the report). */
    failInterrupted: (now: number, reason: string) => db.run("UPDATE report_runs SET status = 'failed', finished_ms = $1, reason = $2 WHERE status = 'running'", [now, reason]),
    /** Renews this process's leases on its running runs. */
    async hold(runIds: string[]): Promise<void> {
      await db.run(`UPDATE leases SET expires_at = now() + $3 * interval '1 millisecond' WHERE name = ANY($1::text[]) AND holder = $2`, [runIds.map((id) => RUN_LEASE + id), holder, RUN_LEASE_MS])
    },
    /**
     * Fails the running runs no live lease holds (their process stopped), and lets go of
     * the leases of runs that no longer run (finished, queued again, deleted) or lapsed.
     */
    failOrphaned: (now: number, reason: string) =>
      db.value<number>(
        `WITH f AS (UPDATE report_runs r SET status = 'failed', finished_ms = $1, reason = $2
                    WHERE status = 'running' AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.name = $3 || r.id AND l.expires_at > now()) RETURNING id),
              d AS (DELETE FROM leases l WHERE l.name LIKE $3 || '%'
                    AND (l.expires_at <= now() OR NOT EXISTS (SELECT 1 FROM report_runs r WHERE $3 || r.id = l.name AND r.status = 'running')))
         SELECT count(*) FROM f`,
        [now, reason, RUN_LEASE],
      ) as Promise<number>,
    /** Takes a due e-mail until `untilMs`, if its next attempt is still the one read. */
    claimMail: async (runId: string, nextMs: number, untilMs: number) =>
      (await db.run("UPDATE report_runs SET email_next_ms = $3 WHERE id = $1 AND email_status = 'pending' AND email_next_ms = $2", [runId, nextMs, untilMs])) === 1,
    fail: async (id: string, now: number, reason: string) =>
      (await db.run("UPDATE report_runs SET status = 'failed', finished_ms = $1, reason = $2 WHERE id = $3 AND status = 'running'", [now, reason.slice(0, 1000), id])) === 1,
    succeed: async (r: RunSuccess) =>
      (await db.run(
        `UPDATE report_runs SET status = 'succeeded', finished_ms = $2, file_name = $3, file_path = $4, size_bytes = $5, row_count = $6, truncated = $7,
           email_status = $8, email_next_ms = $9, email_detail = $10
         WHERE id = $1 AND status = 'running'`,
        [r.id, r.finished_ms, r.file_name, r.file_path, r.size_bytes, r.row_count, r.truncated, r.email_status, r.email_next_ms, r.email_detail],
      )) === 1,
    storedFiles: (reportId: string) => all<RunRow>('SELECT * FROM report_runs WHERE report_id = $1 AND file_path IS NOT NULL AND file_deleted_ms IS NULL ORDER BY seq DESC', [reportId]),
    /** Records the file removed, and removes its content, in one statement. */
    async fileDeleted(id: string, now: number): Promise<boolean> {
      const n = await db.value<number>(
        `WITH gone AS (UPDATE report_runs SET file_deleted_ms = $1 WHERE id = $2 AND file_deleted_ms IS NULL RETURNING id),
              parts AS (DELETE FROM report_file_parts WHERE run_id IN (SELECT id FROM gone)),
              head AS (DELETE FROM report_files WHERE run_id IN (SELECT id FROM gone))
         SELECT count(*) FROM gone`,
        [now, id],
      )
      return n === 1
    },
    newestFile: (reportId: string) =>
      get<RunRow>("SELECT * FROM report_runs WHERE report_id = $1 AND status = 'succeeded' AND file_path IS NOT NULL AND file_deleted_ms IS NULL ORDER BY seq DESC LIMIT 1", [reportId]),
    /** Older records go, except those that still hold a file (it stays downloadable by its id). */
    pruneRuns: (reportId: string, keep: number) =>
      db.run(
        `DELETE FROM report_runs WHERE report_id = $1 AND status IN ('succeeded', 'failed') AND (file_path IS NULL OR file_deleted_ms IS NOT NULL)
           AND seq < (SELECT min(seq) FROM (SELECT seq FROM report_runs WHERE report_id = $1 ORDER BY seq DESC LIMIT $2) newest)`,
        [reportId, keep],
      ),
    pendingMail: (now: number, limit: number) => all<RunRow>("SELECT * FROM report_runs WHERE email_status = 'pending' AND email_next_ms <= $1 ORDER BY email_next_ms, seq LIMIT $2", [now, limit]),
    async setMail(r: RunMail) {
      const changes = await db.run('UPDATE report_runs SET email_status = $2, email_detail = $3, email_attempts = $4, email_next_ms = $5 WHERE id = $1', [
        r.id,
        r.email_status,
        r.email_detail,
        r.email_attempts,
        r.email_next_ms,
      ])
      return { changes }
    },
    health: async () =>
      (await get<Health>(
        `WITH last AS (SELECT DISTINCT ON (report_id) status FROM report_runs WHERE status IN ('succeeded', 'failed') ORDER BY report_id, seq DESC),
              mailed AS (SELECT DISTINCT ON (report_id) email_status FROM report_runs WHERE email_status IN ('sent', 'partial', 'failed') ORDER BY report_id, seq DESC)
         SELECT (SELECT count(*) FROM reports) AS reports,
                (SELECT count(*) FROM reports WHERE is_active = 1) AS active,
                (SELECT count(*) FROM last WHERE status = 'failed') AS runs_failed,
                (SELECT count(*) FROM mailed WHERE email_status = 'failed') AS mail_failed,
                (SELECT count(*) FROM mailed WHERE email_status = 'partial') AS mail_partial,
                (SELECT count(*) FROM report_runs WHERE email_status = 'pending' AND email_attempts > 0) AS mail_retrying,
                (SELECT min(next_run_ms) FROM reports WHERE is_active = 1) AS overdue_before`,
      ))!,
    failures: () =>
      all<Failure>(
        `SELECT r.name, x.reason, x.email_detail, x.email_status, x.status
         FROM (SELECT DISTINCT ON (report_id) * FROM report_runs WHERE status IN ('succeeded', 'failed') ORDER BY report_id, seq DESC) x
         JOIN reports r ON r.id = x.report_id
         WHERE x.status = 'failed' OR x.email_status IN ('failed', 'partial')
         ORDER BY x.seq DESC LIMIT 3`,
      ),

    // ---- files ----
    /**
     * Stores a run's file (its content as chunks of any size, e.g. a read stream of the
     * file the run wrote), in parts of FILE_PART_BYTES, in one unit of work (the caller's,
     * when it is in one): whole or not at all. Answers false, storing nothing, when the
     * run is gone (its report was deleted meanwhile); a file stored again replaces the last.
     */
    storeFile(runId: string, mediaType: string, content: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, now = Date.now()): Promise<boolean> {
      return db.uow.run(async () => {
        // Holds the run (a delete of its report waits) while its parts are written.
        if ((await db.value('SELECT 1 FROM report_runs WHERE id = $1 FOR KEY SHARE', [runId])) === undefined) return false
        await db.run('DELETE FROM report_files WHERE run_id = $1', [runId])
        await db.run('DELETE FROM report_file_parts WHERE run_id = $1', [runId])
        let part = 0
        let size = 0
        for await (const buf of partsOf(content, FILE_PART_BYTES)) {
          await db.run('INSERT INTO report_file_parts (run_id, part, content) VALUES ($1, $2, $3)', [runId, part++, buf])
          size += buf.length
        }
        await db.run('INSERT INTO report_files (run_id, media_type, size_bytes, parts, stored_ms) VALUES ($1, $2, $3, $4, $5)', [runId, mediaType, size, part, now])
        return true
      })
    },
    /** A run's stored file: media type, size and parts; undefined when it has none (or it was removed). */
    fileOf: (runId: string) => get<StoredFileHead>('SELECT media_type, size_bytes, parts FROM report_files WHERE run_id = $1', [runId]),
    /**
     * A run's stored file, a part at a time (a query each: no connection is held between
     * parts, however slowly the caller reads). A file removed while it is read (the
     * retention rule, a deleted report) ends the read with an error, not a short file.
     */
    async *fileContent(runId: string, signal?: AbortSignal): AsyncGenerator<Buffer> {
      const head = await runs.fileOf(runId)
      if (!head) throw new Error(`run ${runId} has no stored file`)
      for (let part = 0; part < head.parts; part++) {
        signal?.throwIfAborted()
        const row = await db.one<{ content: Buffer }>('SELECT content FROM report_file_parts WHERE run_id = $1 AND part = $2', [runId, part])
        if (!row) throw new Error(`the file of run ${runId} was removed while it was read`)
        yield row.content
      }
    },
    /** The whole file in memory (a mail attachment: at most 10 MiB); undefined without one. */
    async fileBytes(runId: string): Promise<{ media_type: string; content: Buffer } | undefined> {
      const head = await runs.fileOf(runId)
      if (!head) return undefined
      const chunks: Buffer[] = []
      for await (const c of runs.fileContent(runId)) chunks.push(c)
      return { media_type: head.media_type, content: Buffer.concat(chunks) }
    },
  }
  return runs
}
