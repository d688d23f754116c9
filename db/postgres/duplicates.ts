// A row a unique index refused. A service looks the key up before it writes, but on
// PostgreSQL another unit of work (on this node or another) may write the same key between
// the look-up and the write; the index decides. Named by `code`, since services import
// nothing from db/: each answers it as the conflict its look-up would have found.

export class DuplicateKey extends Error {
  readonly code = 'duplicate-key'
  constructor(
    /** The unique index (or constraint) that refused the row. */
    readonly index: string,
    options?: { cause: unknown },
  ) {
    super(`A row with the same key is already stored (${index}).`, options)
    this.name = 'DuplicateKey'
  }
}

/** Runs `work`; a refusal by the unique index `index` becomes a DuplicateKey. */
export async function refusedAsDuplicate<T>(index: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (err) {
    const e = err as { code?: string; constraint?: string }
    if (e.code === '23505' && e.constraint === index) throw new DuplicateKey(index, { cause: err })
    throw err
  }
}
