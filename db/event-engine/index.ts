// The event engine's one entry: the lists, counts, feeds and exports of events and audit
// records over SQLite's own structures (ARCHITECTURE.md, "The event engine"), and the few
// shapes the rest of the storage shares with it (the sorts PostgreSQL orders by, the prune's
// delta). Nothing outside this folder imports anything else of it (the layering check's
// `event-engine-one-entry`); tests and benchmarks of its parts may.
export * from './event-queries.js'
export type { PruneDelta } from './event-index.js'

export { auditSorts, eventSorts, sortsEveryMatch, type SortField } from './event-plans.js'
