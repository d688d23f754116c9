// backend: none — pure functions: no app is built and no database opened
import t from 'tap'
import type { FastifyRequest } from 'fastify'
import { bearerToken } from '../lib/auth.js'

const of = (authorization?: string) => bearerToken({ headers: authorization === undefined ? {} : { authorization } } as FastifyRequest)

t.test('the token of a Bearer authorization header', async (t) => {
  t.equal(of('Bearer abc.def-ghi_~'), 'abc.def-ghi_~')
  t.equal(of('bearer abc'), 'abc', 'the scheme in any case')
  t.equal(of('BEARER \t abc \t '), 'abc', 'spaces and tabs around the token')
  t.equal(of('Bearer ' + 'x'.repeat(4096)), 'x'.repeat(4096), 'up to 4096 characters')
})

t.test('anything else is no token', async (t) => {
  for (const header of [
    undefined,
    '',
    'Bearer',
    'Bearer ',
    'Bearer \t ',
    'Bearerabc',
    'Basic YWJjOmRlZg==',
    'Token abc',
    ' Bearer abc',
    'Bearer a b',
    'Bearer ab\u00e9',
    'Bearer a\u0000b',
    'Bearer ' + 'x'.repeat(4097),
  ]) {
    t.equal(of(header), undefined, JSON.stringify(header)?.slice(0, 40) ?? 'no header')
  }
})
