// GET /metrics (lib/platform/metrics.ts): this node's metrics in Prometheus' text format, for
// an Administrator's credential only; requests counted by operation and status, the
// latency histogram, the process, the expensive reads, the loops, the alarm outbox per
// destination, and on PostgreSQL the pools. On the test pass's backend (both passes).
import t from 'tap'
import { build, call, login, userWithProfile } from './helpers.js'
import { ALARM_PATH, alarmEnv } from './fixtures/receivers.js'

/** The value of one sample line (its name with labels as written), or undefined. */
const sample = (text: string, series: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

{
  t.test('the metrics', async (t) => {
    const app = await build(t, alarmEnv)
    const backend = app.storage.backend
    const admin = await login(app)

    const anonymous = await app.inject({ method: 'GET', url: '/metrics' })
    t.equal(anonymous.statusCode, 401, 'no credential: 401')
    const user = await userWithProfile(app, admin, 'metrics-user', 10)
    const refused = await call(app, user, { method: 'GET', url: '/metrics' })
    t.equal(refused.statusCode, 403, 'a User: 403')

    for (let i = 0; i < 3; i++) t.equal((await call(app, admin, { method: 'GET', url: '/prime/webui/admin/getuserdetails' })).statusCode, 200)
    const hook = await call(app, admin, {
      method: 'POST',
      url: `${ALARM_PATH}/AddOrUpdateAlarmDest`,
      payload: { name: 'soc-hook', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/hooks/prime', secret: 'whsec-0123456789abcdef' } },
    })
    t.equal(hook.statusCode, 200, hook.body)
    const id = hook.json().id

    // What Prometheus sends.
    const res = await call(app, admin, { method: 'GET', url: '/metrics', headers: { accept: 'application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1' } })
    t.equal(res.statusCode, 200, res.body.slice(0, 300))
    t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/, "Prometheus' text format")
    const text = res.body
    t.equal(sample(text, 'prime_http_requests_total{operation="getUserDetails",status="200"}'), 3, 'requests by operation and status')
    t.equal(sample(text, 'prime_http_requests_total{operation="getMetrics",status="403"}'), 1, 'refusals too')
    t.equal(sample(text, 'prime_http_request_duration_seconds_count{operation="getUserDetails"}'), 3, 'the latency histogram')
    t.ok((sample(text, 'prime_http_request_duration_seconds_bucket{le="30",operation="getUserDetails"}') ?? 0) === 3, 'its buckets')
    t.match(text, /^prime_nodejs_eventloop_lag_seconds \d/m, 'the event loop delay')
    t.match(text, /^prime_process_resident_memory_bytes \d/m, 'the process memory')
    t.equal(sample(text, 'prime_expensive_reads{state="running"}'), 0, 'the expensive reads')
    t.equal(sample(text, `prime_alarm_outbox_pending{destination="${id}",name="soc-hook",type="webhook"}`) !== undefined, true, 'the outbox per destination')
    t.ok((sample(text, `prime_alarm_outbox_lag_seconds{destination="${id}",name="soc-hook",type="webhook"}`) ?? -1) >= 0, 'and its lag')
    t.match(text, /^prime_loop_running\{loop="alarm-delivery",singleton="(true|false)"\} [01]$/m, 'the loops')
    if (backend === 'postgres') t.ok((sample(text, 'prime_db_pool_clients{pool="requests",state="total"}') ?? 0) >= 1, "the database pool's clients")
    else t.notMatch(text, /prime_db_pool_clients/, 'no pool on SQLite')
  })
}
