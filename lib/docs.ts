import type { FastifyInstance } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'

/**
 * The page's policy: its scripts and styles are files of its own; Swagger UI sets style
 * attributes as it renders, hence 'unsafe-inline' for styles only (a hash list would turn
 * it off). No upgrade-insecure-requests: the server itself speaks HTTP, and the page's
 * calls (the contract, "Try it out") go to the address it was loaded from.
 */
export const DOCS_CSP =
  "default-src 'self'; base-uri 'self'; connect-src 'self'; font-src 'self' data:; form-action 'self'; frame-ancestors 'self'; img-src 'self' data:; object-src 'none'; script-src 'self'; script-src-attr 'none'; style-src 'self' 'unsafe-inline'"

/**
 * Runs in the browser (serialized into the page's initializer, so it must stand alone):
 * the contract as the page shows it. Swagger UI fills each parameter of "Try it out"
 * with its example, so a list would be filtered by eleven sample values until they are
 * cleared; the examples move into the parameters' descriptions instead. The contract
 * served at docs/json stays as it is.
 *
 * No function inside it (nor in docsAuthorizePlugin) takes its name from a variable or a
 * property: a transpiler that keeps names (esbuild's keepNames, as tsx runs the sources)
 * wraps such a function in a helper the page does not have.
 */
export function docsResponseInterceptor(res: { url?: string; text?: string; obj?: unknown; body?: unknown }) {
  if (!res || typeof res.text !== 'string' || !/\/docs\/json(?:\?|$)/.test(res.url || '')) return res
  let spec: any
  try {
    spec = JSON.parse(res.text)
  } catch {
    return res
  }
  const schemas = spec.components?.schemas || {}
  // Every parameter: the shared ones, each path's and each operation's.
  const parameters: any[] = Object.values(spec.components?.parameters || {})
  for (const item of Object.values<any>(spec.paths || {})) {
    parameters.push(...(item.parameters || []))
    for (const op of Object.values<any>(item)) if (op && Array.isArray(op.parameters)) parameters.push(...op.parameters)
  }
  for (const p of parameters) {
    if (!p || typeof p !== 'object' || p.$ref) continue
    let example: unknown
    if (p.example !== undefined) example = p.example
    else if (p.examples && typeof p.examples === 'object') {
      const first: any = Object.values(p.examples)[0]
      if (first && first.value !== undefined) example = first.value
    }
    delete p.example
    delete p.examples
    if (p.schema?.$ref) {
      // A shared schema's own example fills the field too: the parameter gets a copy without it.
      const target = schemas[String(p.schema.$ref).replace('#/components/schemas/', '')]
      if (target && target.example !== undefined) p.schema = { ...target }
    }
    if (p.schema && !p.schema.$ref && p.schema.example !== undefined) {
      if (example === undefined) example = p.schema.example
      p.schema = { ...p.schema }
      delete p.schema.example
    }
    const shown = typeof example === 'string' ? example : JSON.stringify(example)
    if (example !== undefined) p.description = `${p.description ? `${p.description}\n\n` : ''}Example: \`${shown}\``
  }
  res.text = JSON.stringify(spec)
  res.obj = spec
  res.body = spec
  return res
}

/**
 * Runs in the browser: the Authorize dialog offers the user scheme only (people log in
 * with Auth/LocalLogin); agents and worker pollers hold credentials of their own and do not
 * use this page. The wrapper is set as an entry, not as a property's value: see
 * docsResponseInterceptor.
 */
export function docsAuthorizePlugin() {
  return {
    statePlugins: {
      auth: {
        wrapSelectors: Object.fromEntries([
          [
            'definitionsToAuthorize',
            (original: any) =>
              (...args: any[]) => {
                const all = original(...args)
                if (!all || typeof all.filter !== 'function') return all
                const users = all.filter((entry: any) => entry && typeof entry.has === 'function' && entry.has('bearerAuth'))
                return users.size > 0 ? users : all
              },
          ],
        ]),
      },
    },
  }
}

/** The API's documentation page and the contract itself, served from spec/openapi.yaml. */
export async function registerDocs(app: FastifyInstance, spec: Record<string, any>) {
  await app.register(swagger, { mode: 'static', specification: { document: spec as any } })
  await app.register(swaggerUi, {
    routePrefix: '/prime/webui/docs',
    staticCSP: DOCS_CSP,
    uiConfig: {
      docExpansion: 'none',
      deepLinking: true,
      responseInterceptor: docsResponseInterceptor as any,
      // The page's default plugin (downloading the contract from ./json) plus the dialog's.
      plugins: [((system: any) => (globalThis as any).SwaggerUIBundle.plugins.DownloadUrl(system)) as any, docsAuthorizePlugin as any],
    },
  })
}
