// The retention job's wiring: `app.retention.run()` (tests, scripts/retention.ts) and its loop.
import type { FastifyInstance } from 'fastify'
import type { Loop } from '../platform/loops.js'
import type { RetentionRun } from './job.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Runs the retention job now (as its timer does); resolves with what it deleted. */
    retention: { run(now?: number): Promise<RetentionRun> }
  }
}

/** The job made in lib/services.ts, as the app's loop. */
export function retentionLoop(app: FastifyInstance): Loop {
  const job = app.services.retention
  app.decorate('retention', { run: job.run })
  return job.loop
}
