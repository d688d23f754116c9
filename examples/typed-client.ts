import { asProblem, createPrimeClient, PrimeProblemError, type components, type PrimeClient, type Problem } from '../client/index.js'

type Agent = components['schemas']['AgentViewResource']
type Event = components['schemas']['PrimeEventView']

/** Logs in; the client logs in again before the token expires and after a 401. */
export function connect(baseUrl: string, username: string, password: string): PrimeClient {
  return createPrimeClient({ baseUrl, login: { username, password } })
}

/** Every agent, a page at a time, in a stable order. */
export async function* allAgents(prime: PrimeClient, pageSize = 500): AsyncGenerator<Agent> {
  for (let pageNumber = 1; ; pageNumber++) {
    const { data, error, response } = await prime.GET('/prime/webui/agents', {
      params: { query: { PageNumber: pageNumber, PageSize: pageSize, SortBy: 'hostIdentifier_asc' } },
    })
    if (!data) throw new PrimeProblemError(asProblem(error, response))
    yield* data.data
    if (pageNumber * pageSize >= data.recordsFiltered) return
  }
}

/**
 * One poll of the events feed from `fromEventId`: each page holds the oldest events not
 * yet read, newest first. Answers where the next poll starts.
 */
export async function pollEvents(prime: PrimeClient, fromEventId: number, onEvent: (event: Event) => void): Promise<number> {
  const { data, error, response } = await prime.GET('/prime/webui/Events/GetEventsIntegration', {
    params: { query: { FromEventId: fromEventId, PageSize: 1000 } },
  })
  if (!data) throw new PrimeProblemError(asProblem(error, response))
  for (const event of [...data.data].reverse()) onEvent(event)
  return data.data.length > 0 ? data.data[0].eventID + 1 : fromEventId
}

/** Arms an agent; a refusal comes back as a problem document naming what is wrong. */
export async function arm(prime: PrimeClient, hostIdentifier: string): Promise<string | Problem> {
  const { data, error, response } = await prime.POST('/prime/webui/agents/configuration', {
    body: [{ uuid: null, hostIdentifier, ipAddress: null, agentConfigViewResource: { isSystemArmed: 'ARM' } }],
  })
  if (!data) return asProblem(error, response)
  return data[0].uuid ?? ''
}

// As a script: node typed-client.js http://127.0.0.1:8080 admin '<password>'
if (import.meta.url === `file://${process.argv[1]}`) {
  const [baseUrl = 'http://127.0.0.1:8080', username = 'admin', password = process.env.PRIME_PASSWORD ?? ''] = process.argv.slice(2)
  const prime = connect(baseUrl, username, password)
  let agents = 0
  for await (const agent of allAgents(prime)) if (agent.operationalStatus === 'Armed') agents++
  console.log(`${agents} armed agents`)
  let next = 1
  for (;;) {
    const from = next
    next = await pollEvents(prime, from, (e) => console.log(e.eventID, e.severityString, e.description))
    if (next === from) break
  }
  const answer = await arm(prime, 'NO-SUCH-HOST')
  if (typeof answer !== 'string') console.log(`arming refused: ${answer.status} ${answer.detail}`)
}
