// Answers kept while no notification changes. Every change to a notification, a group or
// a pin takes the next change number (notification_counter), so an answer read at one
// change number is the answer for as long as the number stays: the question is exact,
// not an estimate. Read marks are part of the questions that depend on them.
import { Cache } from '../../db/cache.js'

export class KeptAnswers {
  private readonly cache: Cache<string, unknown>

  /** `max` answers at most (0: none is kept); least recently used first out. */
  constructor(max: number) {
    this.cache = new Cache({ max })
  }

  answer<T>(seq: number, key: string, read: () => T): T {
    this.cache.validFor(seq)
    return this.cache.getOrSet(key, read) as T
  }
}
