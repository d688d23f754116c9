import t from 'tap'
import { build, login, bearer } from './helpers.js'

t.test('admin logs in and lists accounts', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const res = await app.inject({ url: '/prime/webui/admin/all', headers: bearer(token) })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json()[0].userName, 'admin')
})
