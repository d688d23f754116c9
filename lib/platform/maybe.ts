// A value now or later. The per-request lookups (credentials) answer at once on SQLite, whose
// statements are synchronous, and through a Promise on PostgreSQL; code written over `Maybe`
// takes the synchronous path without a Promise when it can: a small request's hooks cost
// more in promises than in their own work.

export type Maybe<T> = T | Promise<T>

export const isPromise = <T>(v: Maybe<T>): v is Promise<T> => typeof (v as { then?: unknown } | null | undefined)?.then === 'function'

/** `fn(v)`, at once when `v` is a value, else once it resolves. */
export function then<T, R>(v: Maybe<T>, fn: (value: T) => Maybe<R>): Maybe<R> {
  return isPromise(v) ? v.then(fn) : fn(v)
}
