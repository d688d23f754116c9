// Loops over every operation of the contract: no credential, an expired, a forged or an
// unsigned token answer 401; a profile below the operation's minimum answers 403; enough
// profile answers neither, for a session and an integration token alike, except that an
// integration token gets 403 on an operation marked `x-no-integration-token` whatever its
// profile. A new operation cannot forget its guard.
import crypto from 'node:crypto'
import t from 'tap'
import { build, login, userWithProfile } from './helpers.js'

const sample = (schema: any): string => {
  if (schema?.format === 'uuid') return crypto.randomUUID()
  if (schema?.type === 'integer') return '12345'
  return 'sample-id'
}

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')

const SECRET = 'pes_matrix-enrollment-secret'

t.test('authentication and profile matrix over every operation', async (t) => {
  const app = await build(t, { PRIME_AGENT_ENROLLMENT_SECRET: SECRET })
  const admin = await login(app)
  const enrolled = await app.inject({ method: 'POST', url: '/prime/webui/gateway/enroll', payload: { enrollmentSecret: SECRET, machineId: 'matrix-machine-0001', hostIdentifier: 'MATRIX' } })
  t.equal(enrolled.statusCode, 200, enrolled.body)
  const agentCredential = enrolled.json().credential as string
  const tokens: Record<number, string> = {
    10: await userWithProfile(app, admin, 'matrix-user', 10),
    20: await userWithProfile(app, admin, 'matrix-manager', 20),
    30: admin,
  }
  const integrationTokens: Record<number, string> = {}
  for (const profile of [10, 20, 30]) {
    const res = await app.inject({
      method: 'POST',
      url: '/prime/webui/admin/integrationTokens',
      headers: { authorization: `Bearer ${admin}` },
      payload: { name: `matrix-${profile}`, userProfile: profile },
    })
    t.equal(res.statusCode, 200, res.body)
    integrationTokens[profile] = res.json().token
  }
  const now = Date.now()
  const principal = await app.tokens.authenticate(admin, now)
  const expired = app.jwt.sign({ sub: String(principal.id), sid: principal.sessionId, ims: now - 3_600_000, iat: Math.floor(now / 1000) - 3600 })
  const forgedBody = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub: '1', sid: principal.sessionId, ims: now, iss: 'prime-webui', exp: Math.floor(now / 1000) + 600 })}`
  const forged = `${forgedBody}.${crypto.createHmac('sha256', 'not-the-secret-not-the-secret-000').update(forgedBody).digest('base64url')}`
  const unsigned = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: '1', sid: principal.sessionId, ims: now, iss: 'prime-webui', exp: Math.floor(now / 1000) + 600 })}.`

  const { spec, operations } = app.contract
  for (const op of operations.values()) {
    const raw = spec.paths[op.path][op.method.toLowerCase()]
    const params = Object.fromEntries((raw.parameters ?? []).filter((p: any) => p.in === 'path').map((p: any) => [p.name, sample(p.schema)]))
    const url = op.path.replace(/\{(\w+)\}/g, (_: string, name: string) => params[name])
    const send = (authorization?: string) => app.inject({ method: op.method as any, url, headers: authorization ? { authorization } : {} })

    if (op.access.kind === 'public') continue
    const none = await send()
    t.equal(none.statusCode, 401, `${op.operationId} without a credential`)
    t.match(String(none.headers['www-authenticate']), /^Bearer/, `${op.operationId} WWW-Authenticate`)
    if (op.access.kind === 'agent') {
      // The agent gateway takes only agent credentials, never a user's token.
      for (const token of [admin, tokens[10], 'pag_not-a-credential', 'garbage']) {
        t.equal((await send(`Bearer ${token}`)).statusCode, 401, `${op.operationId} with a user token or a wrong credential`)
      }
      continue
    }
    if (op.access.kind !== 'user') continue
    t.equal((await send(`Bearer ${agentCredential}`)).statusCode, 401, `${op.operationId} with an agent credential`)
    for (const [name, token] of [
      ['expired', expired],
      ['forged', forged],
      ['unsigned', unsigned],
      ['garbage', 'not-a-token'],
    ]) {
      t.equal((await send(`Bearer ${token}`)).statusCode, 401, `${op.operationId} with a ${name} token`)
    }
    for (const profile of [10, 20, 30]) {
      // Logging out ends the session it is called with: give it a session of its own.
      const token =
        op.operationId === 'logout' ? await login(app, profile === 30 ? 'admin' : profile === 20 ? 'matrix-manager' : 'matrix-user', profile === 30 ? undefined : 'Battery-staple-97') : tokens[profile]
      const res = await send(`Bearer ${token}`)
      if (profile < op.access.minProfile) t.equal(res.statusCode, 403, `${op.operationId} as profile ${profile}`)
      else t.notOk([401, 403].includes(res.statusCode), `${op.operationId} as profile ${profile} answered ${res.statusCode} ${res.body}`)
      const viaToken = await send(`Bearer ${integrationTokens[profile]}`)
      if (profile < op.access.minProfile || op.noIntegrationToken) t.equal(viaToken.statusCode, 403, `${op.operationId} with an integration token of profile ${profile}`)
      else t.notOk([401, 403].includes(viaToken.statusCode), `${op.operationId} with an integration token of profile ${profile} answered ${viaToken.statusCode} ${viaToken.body}`)
    }
  }
})
