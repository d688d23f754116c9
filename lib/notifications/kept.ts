// Answers kept while no notification changes. Every change to a notification, a group or
// a pin takes the next change number (notification_counter), so an answer read at one
// change number is the answer for as long as the number stays: the question is exact,
// not an estimate. Read marks are part of the questions that depend on them.
import { cacheIn, type Cache, type CacheRegistry } from '../platform/cache.js'

export class KeptAnswers {
  private readonly cache: Cache<string, unknown>
  private seq: number | undefined

  /** `max` answers at most (0: none is kept); least recently used first out; made in `caches` when given. */
  constructor(max: number, caches?: CacheRegistry) {
    this.cache = cacheIn(caches, { name: 'notification-answers', signal: 'any change to a notification, a group or a pin (the change number)', max, maxBytes: 16 * 1024 * 1024 })
  }

  /**
   * The answer kept for `key` at change number `seq`, else `read()`'s. An answer read while
   * a change was written is kept under the number read before it, which the next question
   * (asked at the new number) no longer accepts; one read while a later number was asked
   * is not kept.
   */
  async answer<T>(seq: number, key: string, read: () => Promise<T>): Promise<T> {
    this.cache.validFor(seq)
    this.seq = seq
    const kept = this.cache.get(key) as T | undefined
    if (kept !== undefined) return kept
    const value = await read()
    if (this.seq === seq) this.cache.set(key, value)
    return value
  }
}
