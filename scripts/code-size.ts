// The sizes the code keeps (docs/development.md, lint:sizes): no function over 300 lines, factories
// and the closures inside them included, and no source file over 600 lines in db/, lib/ and
// handlers/. `npm run lint:sizes` lists what is over; tests/code-size.test.ts holds the line.
import fs from 'node:fs'
import path from 'node:path'
import ts from 'typescript'
import { projectRoot } from '../lib/paths.js'

export const MAX_FUNCTION_LINES = 300
export const MAX_FILE_LINES = 600
export const SIZED_DIRS = ['db', 'lib', 'handlers']

export interface Oversize {
  file: string
  /** The function's name, or null for the file itself. */
  name: string | null
  line: number
  lines: number
}

function sourceFiles(dir: string): string[] {
  return fs
    .readdirSync(path.join(projectRoot, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.ts$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) => path.relative(projectRoot, path.join(e.parentPath ?? e.path, e.name)))
    .sort()
}

function functionName(node: ts.Node): string {
  const named = node as ts.Node & { name?: ts.Node }
  if (named.name && ts.isIdentifier(named.name)) return named.name.text
  const parent = node.parent
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text
  if (parent && ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name)) return parent.name.text
  return '(anonymous)'
}

/** Every function of the sized folders over MAX_FUNCTION_LINES and every file over MAX_FILE_LINES. */
export function oversized(): Oversize[] {
  const found: Oversize[] = []
  for (const file of SIZED_DIRS.flatMap(sourceFiles)) {
    const text = fs.readFileSync(path.join(projectRoot, file), 'utf8')
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0)
    if (lines > MAX_FILE_LINES) found.push({ file, name: null, line: 1, lines })
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
    const visit = (node: ts.Node) => {
      if (ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) || ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node)) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line
        if (end - start + 1 > MAX_FUNCTION_LINES) found.push({ file, name: functionName(node), line: start + 1, lines: end - start + 1 })
      }
      ts.forEachChild(node, visit)
    }
    visit(source)
  }
  return found
}

export const describe = (o: Oversize) => (o.name === null ? `${o.file}: ${o.lines} lines (file)` : `${o.file}:${o.line} ${o.name}: ${o.lines} lines`)

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename ?? '')) {
  const over = oversized()
  for (const o of over) console.log(describe(o))
  console.log(`${over.length} over the limits (functions ${MAX_FUNCTION_LINES} lines, files ${MAX_FILE_LINES})`)
}
