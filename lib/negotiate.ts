import Negotiator from 'negotiator'
import type { FastifyRequest } from 'fastify'

const jsonFamily = /^(application\/json|text\/json|application\/[\w.+-]+\+json|application\/json-patch\+json)$/i

/** Request media types that are all parsed as JSON. */
export const isJsonMediaType = (type: string) => jsonFamily.test(type)

/** The best of `offered` that the request's Accept allows; undefined when none is. */
export function chooseResponseType(req: FastifyRequest, offered: string[]): string | undefined {
  if (offered.length === 0) return undefined
  const accept = req.headers.accept
  if (!accept) return offered[0]
  const chosen = new Negotiator({ headers: { accept } }).mediaType(offered)
  return chosen
}
