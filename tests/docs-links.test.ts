// backend: none — reads the documentation pages, no app or database
// Every relative link of README.md, ARCHITECTURE.md and docs/*.md points to a file that
// exists and, when it names one, to a heading of that page (as GitHub makes its anchors),
// so that moving a section cannot leave a dead link behind.
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../lib/paths.js'

/** The text of `page` without its fenced code blocks and inline code spans (links there are not links). */
function prose(page: string): string {
  return page.replace(/^```[\s\S]*?^```/gm, (block) => block.replace(/[^\n]/g, ' ')).replace(/`[^`\n]*`/g, (span) => ' '.repeat(span.length))
}

/** GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces as hyphens. */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replaceAll(' ', '-')
}

/** The anchors of a Markdown page's headings (a repeated heading gets -1, -2, ... as on GitHub). */
export function anchors(page: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const m of page.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(m[1])
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

/** The broken relative links of the page at `file`, each with its line and why. */
export function brokenLinks(file: string, page: string): string[] {
  const problems: string[] = []
  const text = prose(page)
  for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = m[1]
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue
    const line = text.slice(0, m.index).split('\n').length
    const [rel, anchor] = target.split('#', 2)
    const resolved = rel ? path.resolve(path.dirname(file), decodeURIComponent(rel)) : file
    const where = `${path.relative(projectRoot, file)} line ${line}: ${target}`
    if (rel && !fs.existsSync(resolved)) {
      problems.push(`${where}: no such file`)
      continue
    }
    if (anchor === undefined || !resolved.endsWith('.md')) continue
    if (!anchors(rel ? fs.readFileSync(resolved, 'utf8') : page).has(anchor)) problems.push(`${where}: no heading #${anchor} in ${path.relative(projectRoot, resolved)}`)
  }
  return problems
}

const pages = [
  'README.md',
  'ARCHITECTURE.md',
  ...fs
    .readdirSync(path.join(projectRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]

t.test('every relative link between the pages leads somewhere', async (t) => {
  let links = 0
  for (const p of pages) {
    const file = path.join(projectRoot, p)
    const page = fs.readFileSync(file, 'utf8')
    links += [...prose(page).matchAll(/\]\((?![a-z][a-z0-9+.-]*:)[^)\s]+\)/gi)].length
    t.same(brokenLinks(file, page), [], `${p}: no broken link`)
  }
  t.ok(links >= 40, `${links} relative links checked`)
})

t.test('the README links every page of docs/ and ARCHITECTURE.md', async (t) => {
  const readme = fs.readFileSync(path.join(projectRoot, 'README.md'), 'utf8')
  for (const p of pages.filter((p) => p !== 'README.md')) t.match(readme, `](${p})`, `the README links ${p}`)
})

t.test('the checker finds a missing file, a missing heading, and keeps code apart', async (t) => {
  const file = path.join(projectRoot, 'docs', 'x.md')
  const page = [
    '# A page',
    '## Two `words`, here',
    '[ok](#two-words-here) [ok](../README.md) [ok](operating.md#settings) [ok](https://example.com/nowhere)',
    '[gone](nowhere.md) [no heading](operating.md#nowhere) [no local heading](#nothing)',
    '`[in code](nowhere.md)`',
    '```sh',
    '[in a block](nowhere.md)',
    '```',
  ].join('\n')
  t.same(brokenLinks(file, page), [
    'docs/x.md line 4: nowhere.md: no such file',
    'docs/x.md line 4: operating.md#nowhere: no heading #nowhere in docs/operating.md',
    'docs/x.md line 4: #nothing: no heading #nothing in docs/x.md',
  ])
  t.equal(slug('Asset discovery (NAC connector, automation clients)'), 'asset-discovery-nac-connector-automation-clients')
  t.same([...anchors('# A\n## B\n## B\n```\n# not a heading\n```\n')], ['a', 'b', 'b-1'])
})
