// backend: none — reads the source tree and ARCHITECTURE.md, no app or database
// ARCHITECTURE.md's table of import edges between rooms is the tree's: written by
// `npm run docs:architecture`, and this fails when a change moves a figure without it.
import t from 'tap'
import { figuresBlock, pageBlock } from '../scripts/architecture-figures.js'

t.test("ARCHITECTURE.md's import figures are the tree's", async (t) => {
  const page = pageBlock()
  t.ok(page, 'the page has its figures markers')
  t.equal(page, figuresBlock(), 'as written by npm run docs:architecture')
})
