import t from 'tap'
import { loadSpec, operations } from '../lib/contract.js'
import { deprecationHeaders } from '../lib/deprecation.js'
import { bearer, build, login } from './helpers.js'

/** The contract with one operation, one query parameter and one body property deprecated. */
function deprecatedSpec() {
  const spec = loadSpec()
  Object.assign(spec.paths['/prime/webui/admin/PrimeVersion'].get, {
    deprecated: true,
    'x-deprecated-at': '2026-11-01',
    'x-sunset': '2027-06-30',
    'x-replacement': 'getSystemStatus',
  })
  Object.assign(spec.components.parameters.AgentsHostIdentifier, { deprecated: true, 'x-deprecated-at': '2026-10-01', 'x-replacement': 'GlobalSearch' })
  Object.assign(spec.components.schemas.AccountViewResource.properties.email, { deprecated: true, 'x-deprecated-at': '2026-09-01', 'x-replacement': 'none: e-mail moves to the profile' })
  return spec
}

t.test('a deprecated operation answers with Deprecation, Sunset and its successor', async (t) => {
  const app = await build(t, {}, deprecatedSpec())
  const token = await login(app)
  const res = await app.inject({ url: '/prime/webui/admin/PrimeVersion', headers: bearer(token) })
  t.equal(res.statusCode, 200)
  t.equal(res.headers.deprecation, `@${Date.UTC(2026, 10, 1) / 1000}`, 'RFC 9745: @ and epoch seconds')
  t.equal(res.headers.sunset, 'Wed, 30 Jun 2027 00:00:00 GMT', 'RFC 8594: an HTTP date')
  const status = operations(loadSpec()).get('getSystemStatus')!
  t.equal(res.headers.link, `<${status.path}>; rel="successor-version"`)
  const refused = await app.inject({ url: '/prime/webui/admin/PrimeVersion' })
  t.equal(refused.statusCode, 401)
  t.ok(refused.headers.deprecation, 'said on refusals too: the caller still learns it')

  const other = await app.inject({ url: '/prime/webui/admin/getuserdetails', headers: bearer(token) })
  t.notOk(other.headers.deprecation, 'other operations say nothing')
})

t.test('a deprecated parameter or body property is flagged when used, in any spelling', async (t) => {
  const app = await build(t, {}, deprecatedSpec())
  const token = await login(app)
  const used = await app.inject({ url: '/prime/webui/agents?hostIdentifier=DESKTOP', headers: bearer(token) })
  t.equal(used.statusCode, 200)
  t.equal(used.headers.deprecation, `@${Date.UTC(2026, 9, 1) / 1000}`)
  t.notOk(used.headers.sunset, 'no sunset declared, none sent')
  const unused = await app.inject({ url: '/prime/webui/agents?GlobalSearch=DESKTOP', headers: bearer(token) })
  t.notOk(unused.headers.deprecation)

  const body = { userName: 'maria', email: 'maria@example.com', userProfile: 20, password: 'Manager-pass-2024' }
  const created = await app.inject({ method: 'POST', url: '/prime/webui/admin/adduser', headers: bearer(token), payload: body })
  t.equal(created.statusCode, 200)
  t.equal(created.headers.deprecation, `@${Date.UTC(2026, 8, 1) / 1000}`)
})

t.test('the contract marks deprecation completely', async (t) => {
  t.throws(() => deprecationHeaders({ deprecated: true, 'x-deprecated-at': '2026-01-01' }, 'op'), /x-replacement/)
  t.throws(() => deprecationHeaders({ deprecated: true, 'x-replacement': 'x' }, 'op'), /YYYY-MM-DD/)
  t.throws(() => deprecationHeaders({ deprecated: true, 'x-replacement': 'x', 'x-deprecated-at': '2026-01-01', 'x-sunset': 'soon' }, 'op'), /YYYY-MM-DD/)
  t.equal(deprecationHeaders({ deprecated: false }, 'op'), undefined)
  // loading the real contract checks every deprecated item it has
  t.doesNotThrow(() => operations(loadSpec()))
})
