/**
 * A typed client for the API: openapi-fetch over the types generated from the contract.
 * Every path, parameter, body and answer is checked by the TypeScript compiler against
 * `spec/openapi.yaml`; this module adds only what every integration needs around it:
 * the bearer token (a fixed integration token, or a login that is renewed before it
 * expires and once more after a 401) and problem documents as values.
 */
import createClient, { type Client, type Middleware } from 'openapi-fetch'
import type { components, paths } from '../generated/openapi.js'

export type { components, operations, paths } from '../generated/openapi.js'
export type Problem = components['schemas']['Problem']
export type PrimeClient = Client<paths>

export interface PrimeClientOptions {
  /** The server, without the API's base path: `http://127.0.0.1:8080`. */
  baseUrl: string
  /** A long-lived integration token (SIEM add-ons), or an access token you manage yourself. */
  token?: string
  /** An account to log in with (`Auth/LocalLogin`); the client logs in again as needed. */
  login?: { username: string; password: string }
  /** Another fetch (a proxy agent, tests). */
  fetch?: typeof globalThis.fetch
}

/** Log in again this long before the access token expires (clients of the API use 5 minutes). */
const RENEW_BEFORE_MS = 5 * 60 * 1000

export function createPrimeClient(options: PrimeClientOptions): PrimeClient {
  if (!options.token === !options.login) throw new Error('createPrimeClient takes a token or a login, one of them')
  const fetchImpl = options.fetch ?? globalThis.fetch
  const client = createClient<paths>({ baseUrl: options.baseUrl, fetch: fetchImpl })
  let session: { token: string; expiresAt: number } | undefined = options.token ? { token: options.token, expiresAt: Infinity } : undefined
  let pending: Promise<string> | undefined

  async function logIn(): Promise<string> {
    const { data, error, response } = await createClient<paths>({ baseUrl: options.baseUrl, fetch: fetchImpl }).POST('/prime/webui/Auth/LocalLogin', {
      body: { username: options.login!.username, password: options.login!.password },
    })
    if (!data) throw new PrimeProblemError(asProblem(error, response))
    session = { token: data.token, expiresAt: Date.parse(data.expiresAt) }
    return data.token
  }

  async function token(renew = false): Promise<string> {
    if (session && !renew && session.expiresAt - Date.now() > RENEW_BEFORE_MS) return session.token
    if (!options.login) return session!.token
    pending ??= logIn().finally(() => (pending = undefined))
    return pending
  }

  // A request is kept until its answer, so that it can be sent again after a 401.
  const sent = new Map<string, Request>()
  const auth: Middleware = {
    async onRequest({ request, id }) {
      request.headers.set('authorization', `Bearer ${await token()}`)
      if (options.login) sent.set(id, request.clone())
      return request
    },
    async onResponse({ response, id }) {
      const again = sent.get(id)
      sent.delete(id)
      if (response.status !== 401 || !again) return response
      again.headers.set('authorization', `Bearer ${await token(true)}`)
      return fetchImpl(again)
    },
    onError({ id }) {
      sent.delete(id)
    },
  }
  client.use(auth)
  return client
}

/** A problem document as an Error, for code that prefers to throw. */
export class PrimeProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(`${problem.status} ${problem.title}${problem.detail ? `: ${problem.detail}` : ''}`)
    this.name = 'PrimeProblemError'
  }
}

/** The problem document of a failed call (a body that is not one is described as one). */
export function asProblem(error: unknown, response: Response): Problem {
  if (error && typeof error === 'object' && 'status' in error && 'title' in error) return error as Problem
  return {
    type: 'about:blank',
    title: response.statusText || 'Error',
    status: response.status,
    detail: typeof error === 'string' ? error.slice(0, 4096) : undefined,
    requestId: response.headers.get('x-request-id') ?? '',
  }
}
