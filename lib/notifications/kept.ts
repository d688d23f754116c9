// Answers kept while no notification changes. Every change to a notification, a group or
// a pin takes the next change number (notification_counter), so an answer read at one
// change number is the answer for as long as the number stays: the question is exact,
// not an estimate. Read marks are part of the questions that depend on them.
export class KeptAnswers {
  private readonly entries = new Map<string, unknown>()
  private seq = -1

  /** `max` answers at most (0: none is kept). */
  constructor(private readonly max: number) {}

  answer<T>(seq: number, key: string, read: () => T): T {
    if (this.max === 0) return read()
    if (seq !== this.seq) {
      this.entries.clear()
      this.seq = seq
    }
    if (this.entries.has(key)) {
      // Least recently used first out.
      const kept = this.entries.get(key) as T
      this.entries.delete(key)
      this.entries.set(key, kept)
      return kept
    }
    const answer = read()
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!)
    this.entries.set(key, answer)
    return answer
  }
}
