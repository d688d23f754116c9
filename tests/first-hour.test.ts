// backend: none — reads the documentation, package.json and .ci/run, no app or database
// What a new user meets first, checked: the README stays a front page (short, the two
// commands, every documentation page linked); an example that says "warnings and worse"
// asks for them with the "or worse" filter (MinimumSeverity), not Severity (exactly that
// one); and installing reports nothing anywhere (the analytics switch of @scarf/scarf, which
// the Spectral lint tools pull in, is off in package.json and in CI).
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../lib/paths.js'

const read = (p: string) => fs.readFileSync(path.join(projectRoot, p), 'utf8')
const pages = [
  'README.md',
  ...fs
    .readdirSync(path.join(projectRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]

t.test('the README is a front page', async (t) => {
  const readme = read('README.md')
  const lines = readme.split('\n').length
  t.ok(lines <= 250, `${lines} lines (at most 250: the rest belongs in docs/)`)
  t.match(readme, /^npm ci && npm start\b/m, 'the command that starts the service')
  t.match(readme, /^npm ci && npm test\b/m, 'the command that runs the tests')
  for (const page of pages.filter((p) => p !== 'README.md')) t.ok(readme.includes(`](${page}`), `links ${page}`)
  t.ok(readme.includes('](ARCHITECTURE.md)'), 'links ARCHITECTURE.md')
})

t.test('"worse" in an example is asked for with MinimumSeverity', async (t) => {
  let checked = 0
  for (const page of pages) {
    const blocks = read(page)
      .split('```')
      .filter((_, i) => i % 2 === 1)
    for (const block of blocks) {
      const lines = block.split('\n')
      lines.forEach((line, i) => {
        if (!/^\s*#.*\bworse\b/i.test(line)) return
        // The commands the comment describes: up to the next comment or blank line.
        const commands: string[] = []
        for (const next of lines.slice(i + 1)) {
          if (next.trim() === '' || /^\s*#/.test(next)) break
          commands.push(next)
        }
        const text = commands.join('\n')
        checked++
        t.notMatch(text, /[?&"]severity[=":]/i, `${page}: "${line.trim()}" does not ask for one severity alone`)
        t.match(text, /minimumSeverity/i, `${page}: "${line.trim()}" asks for that severity or worse`)
      })
    }
  }
  t.ok(checked >= 1, `${checked} such examples checked`)
})

t.test('no install step reports anything', async (t) => {
  const pkg = JSON.parse(read('package.json'))
  t.equal(pkg.scarfSettings?.enabled, false, "package.json turns @scarf/scarf's analytics off")
  t.match(read('.ci/run'), /^export SCARF_ANALYTICS=false$/m, 'CI sets its documented switch before npm ci')
  const ci = read('.ci/run')
  t.ok(ci.indexOf('SCARF_ANALYTICS=false') < ci.indexOf('npm ci'), 'before the install')
})
