// npm run backup -- --out <dir> [--data-dir ./data]
// npm run restore -- --from <dir> [--data-dir ./data] [--force]
// Backs up a data directory while the server runs (a consistent copy of the database, every
// other file of the directory, a manifest with checksums), or restores one into a data
// directory after checking it (lib/backup.ts). The data directory defaults to
// PRIME_DATA_DIR, else ./data. With PRIME_DATABASE_URL the database is PostgreSQL's: the
// backup is its dump (lib/backup-postgres.ts), and a restore goes into that database.
import path from 'node:path'
import { parseArgs } from 'node:util'
import { backup, BackupError, restore } from '../lib/backup.js'
import { backupPostgres, restorePostgres } from '../lib/backup-postgres.js'

const USAGE = 'usage: backup --out <dir> [--data-dir <dir>] | restore --from <dir> [--data-dir <dir>] [--force]'

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv
  const { values } = parseArgs({
    args: rest,
    options: { out: { type: 'string' }, from: { type: 'string' }, 'data-dir': { type: 'string' }, force: { type: 'boolean', default: false } },
  })
  const dataDir = path.resolve(values['data-dir'] ?? (process.env.PRIME_DATA_DIR || './data'))
  const url = process.env.PRIME_DATABASE_URL || undefined
  if (url && command === 'backup' && values.out) {
    const r = await backupPostgres(url, path.resolve(values.out))
    console.log(
      `backed up the PostgreSQL database to ${path.resolve(values.out)}: schema version ${r.manifest.schemaVersion}, dump ${(r.manifest.dump.size / 1024 ** 2).toFixed(1)} MiB in ${(r.ms / 1000).toFixed(1)} s`,
    )
    return 0
  }
  if (url && command === 'restore' && values.from) {
    const r = await restorePostgres(path.resolve(values.from), url, { force: values.force })
    console.log(
      `restored the backup of ${r.manifest.createdTime} (schema version ${r.manifest.schemaVersion}) into the PostgreSQL database in ${(r.ms / 1000).toFixed(1)} s; checked: manifest checksum, schema version, no server connected`,
    )
    return 0
  }
  if (command === 'backup' && values.out) {
    const r = await backup(dataDir, path.resolve(values.out))
    const mib = (r.bytes / 1024 ** 2).toFixed(1)
    console.log(
      `backed up ${dataDir} to ${path.resolve(values.out)}: schema version ${r.manifest.schemaVersion}, database ${(r.manifest.database.size / 1024 ** 2).toFixed(1)} MiB and ${r.manifest.files.length} files, ${mib} MiB in ${(r.ms / 1000).toFixed(1)} s`,
    )
    return 0
  }
  if (command === 'restore' && values.from) {
    const r = restore(path.resolve(values.from), dataDir, { force: values.force })
    if (r.movedAside) console.log(`moved the previous contents of ${dataDir} to ${r.movedAside}`)
    console.log(
      `restored the backup of ${r.manifest.createdTime} (schema version ${r.manifest.schemaVersion}, ${r.manifest.files.length} files) into ${dataDir} in ${(r.ms / 1000).toFixed(1)} s; checked: manifest checksums, integrity, schema version`,
    )
    return 0
  }
  console.error(USAGE)
  return 2
}

try {
  process.exitCode = await main(process.argv.slice(2))
} catch (err) {
  if (!(err instanceof BackupError) && !(err instanceof TypeError)) throw err
  console.error(`${err.message}\n${USAGE}`)
  process.exitCode = 1
}
