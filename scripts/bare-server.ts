// The comparison point of the benchmark: a bare Fastify route serving fixed JSON.
import fs from 'node:fs'
import Fastify from 'fastify'

const [, , port, ...files] = process.argv
const app = Fastify({ logger: false })
for (const file of files) {
  const { url, body } = JSON.parse(fs.readFileSync(file, 'utf8'))
  app.get(url, async () => body)
}
await app.listen({ host: '127.0.0.1', port: Number(port) })
process.stdout.write('listening\n')
