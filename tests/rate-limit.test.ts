// backend: none — pure functions: no app is built and no database opened
// Pins the fixed-window counters behind the request and login limits (lib/rate-limit.ts);
// tests/rate-limits.test.ts pins the answers the limits give.
import t from 'tap'
import { fixedWindowLimiter, limitKey } from '../lib/rate-limit.js'

t.test('a window per key opens with its first request and closes after windowMs', async (t) => {
  const limiter = fixedWindowLimiter(3, 10_000)
  t.same(limiter.hit('a', 1_000), { max: 3, remaining: 2, resetSeconds: 10, exceeded: false })
  t.same(limiter.hit('a', 2_500), { max: 3, remaining: 1, resetSeconds: 9, exceeded: false }, 'reset rounds up to whole seconds')
  t.same(limiter.hit('b', 5_000), { max: 3, remaining: 2, resetSeconds: 10, exceeded: false }, 'another key counts on its own')
  t.same(limiter.hit('a', 10_999), { max: 3, remaining: 0, resetSeconds: 1, exceeded: false }, 'the last request allowed')
  t.same(limiter.hit('a', 10_999), { max: 3, remaining: 0, resetSeconds: 1, exceeded: true }, 'one more is over')
  t.same(limiter.hit('a', 11_000), { max: 3, remaining: 2, resetSeconds: 10, exceeded: false }, 'a new window at its end')
  t.equal(limiter.hit('b', 14_999).remaining, 1, 'b keeps its own window')
})

t.test('a refund takes back one request of the open window, never below none', async (t) => {
  const limiter = fixedWindowLimiter(2, 10_000)
  limiter.hit('a', 0)
  limiter.hit('a', 1)
  limiter.refund('a', 2)
  t.equal(limiter.hit('a', 3).exceeded, false, 'the refunded request no longer counts')
  t.equal(limiter.hit('a', 4).exceeded, true)
  limiter.refund('b', 5)
  limiter.hit('c', 0)
  limiter.refund('c', 6)
  limiter.refund('c', 7)
  t.equal(limiter.hit('c', 8).remaining, 1, 'refunds beyond what was counted are ignored')
  limiter.refund('a', 10_000)
  t.equal(limiter.hit('a', 10_000).remaining, 1, 'a refund after the window closed takes nothing from the next')
})

t.test('closed windows are dropped as new ones open; the oldest go when there are too many', async (t) => {
  const limiter = fixedWindowLimiter(5, 1_000, 100)
  for (let i = 0; i < 50; i++) limiter.hit(`old${i}`, 0)
  t.equal(limiter.size, 50)
  limiter.hit('new', 1_000)
  t.equal(limiter.size, 1, 'every closed window went with the next one opened')

  for (let i = 0; i < 150; i++) limiter.hit(`k${i}`, 2_000 + i)
  t.ok(limiter.size <= 100, `at most maxKeys windows (${limiter.size})`)
  t.equal(limiter.hit('k149', 2_200).remaining, 3, 'the newest are kept')
  t.equal(limiter.hit('k0', 2_200).remaining, 4, 'the oldest were dropped: its count starts again')
})

t.test('addresses are counted as IPv4 addresses and IPv6 /64 networks', async (t) => {
  const keys: [string, string][] = [
    ['10.0.0.1', '10.0.0.1'],
    ['::ffff:10.0.0.1', '10.0.0.1'],
    ['::FFFF:192.168.1.2', '192.168.1.2'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:DB8:0001:0002::1', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:db8:1:2:3:4:1.2.3.4', '2001:db8:1:2::/64'],
    ['::1:2:3:4:5:1.2.3.4', '0:1:2:3::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['not-an-address', 'not-an-address'],
  ]
  for (const [ip, key] of keys) t.equal(limitKey(ip), key, ip)
  t.not(limitKey('2001:db8:1:2::1'), limitKey('2001:db8:1:3::1'), 'another /64 is another key')
})
