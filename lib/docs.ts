import type { FastifyInstance } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'

/** The API's documentation page and the contract itself, served from spec/openapi.yaml. */
export async function registerDocs(app: FastifyInstance, spec: Record<string, any>) {
  await app.register(swagger, { mode: 'static', specification: { document: spec as any } })
  await app.register(swaggerUi, { routePrefix: '/prime/webui/docs', staticCSP: true, uiConfig: { docExpansion: 'none', deepLinking: true } })
}
