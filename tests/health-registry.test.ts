// Pins the registry of health checks (lib/platform/health.ts): the platform's checks come
// first, the features add theirs as they are wired, and lib/health.ts knows no feature.
import fs from 'node:fs'
import t from 'tap'
import { build, call, login, testBackend } from './helpers.js'
import { registerHealthCheck } from '../lib/platform/health.js'

// DiskSpace watches the file system of SQLite's file (lib/health.ts): PostgreSQL has none of it.
const ORDER = ['Database', ...(testBackend === 'sqlite' ? ['DiskSpace'] : []), 'Authentication', 'AlarmDelivery', 'Reports', 'WorkerPoller', 'License']

t.test('features register their checks; SubsystemHealth answers them in registration order', async (t) => {
  const app = await build(t)
  t.same(
    app.healthChecks.map((c) => c.name),
    ORDER,
  )
  t.throws(() => registerHealthCheck(app, { name: 'Reports', check: () => ({ status: 'Healthy', detail: '' }) }), /registered twice/)
  const token = await login(app)
  const res = await call(app, token, { url: '/prime/webui/admin/SubsystemHealth' })
  t.same(
    res.json().subsystems.map((s: { name: string }) => s.name),
    ORDER,
  )
})

t.test('lib/health.ts imports no feature (the registry ended the import circle)', async (t) => {
  const source = fs.readFileSync(new URL('../lib/health.ts', import.meta.url), 'utf8')
  const imports = [...source.matchAll(/from '([^']+)'/g)].map((m) => m[1])
  t.same(
    imports.filter((i) => /alarms|reports|notifications|agentless/.test(i)),
    [],
  )
})
