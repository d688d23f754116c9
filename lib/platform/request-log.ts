// What is known once a request is answered: a failed enrollment counts toward the
// gateway's limit, and the request is logged (one line, or a share of the routine summary).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { clientRequestId, requestLineWriter, RoutineSummary } from '../log.js'

/** What logs a request once it is answered, for the pipeline's onResponse hook (lib/platform/pipeline.ts). */
export function requestLog(app: FastifyInstance): (req: FastifyRequest, reply: FastifyReply) => void {
  const { config } = app
  const requestLine = requestLineWriter(app.log)
  const routine = config.logRoutineSeconds > 0 ? new RoutineSummary(app.log, config.logRoutineSeconds * 1000) : null
  app.addHook('onClose', async () => routine?.close())
  return (req, reply) => {
    // The caller's failures only: a 5xx (the database unreachable while PostgreSQL restarts)
    // is the server's, and counted it would keep every agent behind that address out a minute.
    if (req.op?.gatewayLimit === 'enrollment' && reply.statusCode >= 400 && reply.statusCode < 500 && reply.statusCode !== 429) {
      app.services.gateway.enrollmentFailed(req.ip, Date.now())
    }
    // A probe that passes is not worth a line every few seconds; one that fails is. A request
    // whose own id was refused keeps its line, which names that id.
    if (routine && req.routine && reply.statusCode < 400 && clientRequestId(req) === undefined) routine.add(req, reply)
    else if (!(req.op?.probe && reply.statusCode < 400)) requestLine(req, reply)
  }
}
