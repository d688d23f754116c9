// The NAC connector and the automation client discover assets exactly as they call the
// server: GraphQL POST /sepio-data paged until empty (newer connector), the REST list paged
// until `data` is empty (older one), the overview and the distribution. The fleet is made
// through the agent gateway (enroll + check-in) and the agentless API.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login, userWithProfile } from './helpers.js'
import { attackTool, checkIn, enroll, gatewayEnv, hostState, mouse } from './fixtures/gateway.js'

/** The connector's query, as it sends it. */
const QUERY = `query GetDiscoveredAssets($pageNum: Int!, $pageSize: Int!, $filters: [ConditionalRowFilterInput], $systemFilters: [ConditionalRowFilterInput]) {
  conditionalTable(query: { filters: $filters, systemFilters: $systemFilters, globalSearch: "" }
                   pagination: { pageNumber: $pageNum, pageSize: $pageSize, sortBy: "riskLevel_desc" }) {
    data { id mac key isRiskAccepted model iconDescription isOnline riskLevel statusDescription firstSeen lastSeen
           locations { displayString } indicatorViewDetails { subType riskIndicationString description } } } }`

const filter = (index: number, field: string, expression: string, value: string, conditionTypeValue = 'single') => ({
  index,
  field,
  expression,
  value,
  op: 'AND',
  conditionTypeValue,
  is_userattribute: false,
})
const FILTERS = [filter(0, 'isOnline', 'Exact', 'true'), filter(1, 'type', 'Exact', '2,3,8,9,10', 'multiple'), filter(2, 'riskLevel', 'Exact', '2,3,4,5,6,7,8,9', 'multiple')]
const SYSTEM_FILTERS = [filter(0, 'icon', 'NotExact', '50'), filter(1, 'type', 'NotExact', '6'), filter(2, 'hierarchy', 'NotExact', '1')]
/** What the connector's user ticks. */
const TICKED = [
  'Potential Unmanaged Switch',
  'Active Network Threat',
  'Inactive Network Threat',
  'Communication Anomaly',
  'Asset DNA Anomaly',
  'Bad Reputation',
  'Common Vulnerabilities and Exposures (CVE)',
  'Extended Idleness',
  'Low Speed On High Speed Port',
  'Rare Device',
  'Risky Child Connected',
  'Unexpected speed',
  'Unsupervised Host',
  'Unsupervised Network Infrastructure',
]
const SELECTED = ['id', 'mac', 'key', 'isRiskAccepted', 'model', 'iconDescription', 'isOnline', 'riskLevel', 'statusDescription', 'firstSeen', 'lastSeen', 'locations', 'indicatorViewDetails']
/** VID/PID 046D:C52B is a vulnerable device of the shipped catalogue. */
const receiver = {
  deviceID: 'USB\\VID_046D&PID_C52B\\6&1A2B3C4D&0&2',
  vid: '046D',
  pid: 'C52B',
  serialNumber: null,
  description: 'USB Composite Device',
  manufacturer: 'Logitech',
  caption: 'Logitech Unifying Receiver',
  status: 'OK',
  classCode: '03',
  subclassCode: '01',
  protocolCode: '01',
  present: true,
}

interface Fleet {
  attacked: string
  server: string
  unnamed: string
}

async function fleet(app: FastifyInstance, manager: string): Promise<Fleet> {
  const a = await enroll(app, 'nac-machine-a', 'DESKTOP-A')
  t.equal((await checkIn(app, a.credential, hostState([mouse, attackTool], { hostIdentifier: 'DESKTOP-A' }))).statusCode, 200)
  const b = await enroll(app, 'nac-machine-b', 'SRV-B')
  t.equal(
    (
      await checkIn(
        app,
        b.credential,
        hostState([mouse], {
          hostIdentifier: 'SRV-B',
          runningMode: 'Server',
          localIpAddress: '10.0.0.7',
          nics: [
            { name: 'Mgmt', macAddress: 'AA-BB-CC-00-00-01', ipAddresses: ['10.9.9.9'], status: 'Up', isEthernet: true },
            { name: 'Prod', macAddress: 'aabb.cc00.0002', ipAddresses: ['10.0.0.7'], status: 'Up', isEthernet: true },
          ],
          connectedSwitch: { ip: '10.0.0.1', name: 'core-sw2', portId: 'Te1/1', portName: null },
        }),
      )
    ).statusCode,
    200,
  )
  const c = await enroll(app, 'nac-machine-c', 'KIOSK-C')
  t.equal((await checkIn(app, c.credential, hostState([receiver], { hostIdentifier: 'KIOSK-C', localIpAddress: '10.0.0.8', nics: [], connectedSwitch: null }))).statusCode, 200)
  const conn = await call(app, manager, {
    method: 'POST',
    url: '/prime/webui/agents/agentless/connectiondetails',
    payload: { name: 'db-01', address: '10.20.0.15', protocol: 'SSH', userName: 'svc', password: 'correct-horse-battery' },
  })
  t.equal(conn.statusCode, 200, conn.body)
  return { attacked: a.uuid, server: b.uuid, unnamed: c.uuid }
}

t.test('the NAC connector and the automation client discover the fleet as they call it', async (t) => {
  const app = await build(t, gatewayEnv)
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'ops-manager', 20)
  const nac = await userWithProfile(app, admin, 'nac-connector', 10)
  const f = await fleet(app, manager)

  await t.test('newer connector: GraphQL POST /sepio-data, paged until a page is empty', async (t) => {
    const seen: Record<string, any>[] = []
    for (let pageNum = 1; pageNum < 20; pageNum++) {
      const res = await call(app, nac, { method: 'POST', url: '/sepio-data', payload: { query: QUERY, variables: { pageNum, pageSize: 1, filters: FILTERS, systemFilters: SYSTEM_FILTERS } } })
      t.equal(res.statusCode, 200, res.body)
      t.match(res.headers['content-type'], /^application\/json/)
      const data = res.json().data.conditionalTable.data
      if (data.length === 0) break
      seen.push(...data)
    }
    // Online hosts with a risk of 2-9: the three agents (peripherals and the unreached agentless host are not).
    t.same(
      seen.map((a) => a.key),
      [f.attacked, f.unnamed, f.server],
      'riskLevel_desc, one per page, then an empty page',
    )
    for (const a of seen) t.same(Object.keys(a).sort(), [...SELECTED].sort(), 'exactly the fields selected')
    t.same(
      seen.map((a) => a.riskLevel),
      [9, 7, 4],
    )

    const [attacked, unnamed, server] = seen
    t.match(attacked, {
      id: `agent:${f.attacked}`,
      mac: '00:1a:2b:3c:4d:5e',
      isRiskAccepted: false,
      model: 'OptiPlex 7090',
      iconDescription: 'Workstation',
      isOnline: true,
      statusDescription: 'Free',
      locations: [{ displayString: '192.168.100.128 - floor3-sw1 (192.168.100.2) port GigabitEthernet1/0/14' }],
    })
    t.ok(Date.parse(attacked.firstSeen) > 0 && attacked.lastSeen.endsWith('Z'))
    t.same(
      attacked.indicatorViewDetails.map((i: any) => [i.subType, i.riskIndicationString]),
      [
        ['Active Network Threat', 'High'],
        ['Unapproved Peripheral', 'Medium'],
      ],
    )
    t.equal(unnamed.mac, 'Dormant Device', 'a host reporting no adapter MAC')
    t.same(
      unnamed.indicatorViewDetails.map((i: any) => i.subType),
      ['Common Vulnerabilities and Exposures (CVE)', 'Unapproved Peripheral'],
    )
    t.equal(server.mac, 'aa:bb:cc:00:00:02', 'the adapter carrying the host address, whatever the form the agent reported')
    t.equal(server.iconDescription, 'Server')
    t.equal(server.locations[0].displayString, '10.0.0.7 - core-sw2 (10.0.0.1) port Te1/1')

    // What the connector keeps: a MAC, and an indicator its user ticked.
    const kept = seen.filter((a) => a.mac !== 'Dormant Device' && a.indicatorViewDetails.some((i: any) => TICKED.includes(i.subType)))
    t.same(
      kept.map((a) => a.mac),
      ['00:1a:2b:3c:4d:5e'],
      'the host with a known attack tool is the one to act on',
    )
  })

  await t.test('older connector: GET transformerDataApi/assets?pageSize=5000&pageNumber=N until data is empty', async (t) => {
    const all: Record<string, any>[] = []
    let totals: number[] = []
    for (let n = 1; n < 10; n++) {
      const res = await call(app, nac, { url: `/prime/webui/transformerDataApi/assets?pageSize=5000&pageNumber=${n}` })
      t.equal(res.statusCode, 200, res.body)
      const body = res.json()
      totals = [body.recordsTotal, body.recordsFiltered]
      if (body.data.length === 0) break
      all.push(...body.data)
    }
    // 3 hosts with agents, their 4 peripherals, 1 agentless host.
    t.same(totals, [8, 8])
    t.equal(all.length, 8)
    t.equal(new Set(all.map((a) => a.id)).size, 8)
    for (const a of all) {
      t.type(a.mac, 'string')
      t.type(a.type, 'number')
      t.ok('ipAddress' in a && 'id' in a && 'model' in a && 'iconDescription' in a && typeof a.isOnline === 'boolean')
      for (const i of a.indicatorViewDetails) t.ok(['riskIndicationString', 'risk', 'description', 'subType'].every((k) => k in i))
      for (const l of a.locations) t.type(l.displayString, 'string')
    }
    const byId = new Map(all.map((a) => [a.id, a]))
    t.match(byId.get(`agent:${f.server}`), { type: 3, macAddresses: ['aa:bb:cc:00:00:02', 'aa:bb:cc:00:00:01'], ipAddress: '10.0.0.7' })
    const tool = all.find((a) => a.key === `${f.attacked}/${attackTool.deviceID}`)!
    t.match(tool, { type: 1, hierarchy: 2, mac: 'Dormant Device', parentId: `agent:${f.attacked}`, riskLevel: 9, isOnline: true, ipAddress: '192.168.100.128' })
    t.equal(tool.indicatorViewDetails[0].subType, 'Active Network Threat')
    t.match(tool.locations[0].displayString, 'DESKTOP-A (192.168.100.128)')
    const mice = all.filter((a) => a.key.endsWith(mouse.deviceID))
    t.equal(mice.length, 2)
    for (const m of mice)
      t.same(
        m.indicatorViewDetails.map((i: any) => [i.subType, i.risk]),
        [
          ['Rare Device', 5],
          ['Unapproved Peripheral', 4],
        ],
      )
    const host = all.find((a) => a.type === 10)!
    t.match(host, { name: 'db-01', ipAddress: '10.20.0.15', isOnline: false, statusDescription: 'Pending', riskLevel: 4, mac: 'Dormant Device' })
    t.same(
      host.indicatorViewDetails.map((i: any) => i.subType),
      ['Unsupervised Host'],
    )

    // In order of first sight: pages of 3 join up to the same list.
    const paged: string[] = []
    for (let n = 1; n <= 4; n++) paged.push(...(await call(app, nac, { url: `/prime/webui/transformerDataApi/assets?pageSize=3&pageNumber=${n}` })).json().data.map((a: any) => a.id))
    t.same(
      paged,
      all.map((a) => a.id),
    )
  })

  await t.test('automation client: assetsOverview and assetsDistribuition', async (t) => {
    const overview = await call(app, nac, { url: '/prime/webui/transformerDataApi/assetsOverview' })
    t.equal(overview.statusCode, 200, overview.body)
    t.match(overview.json(), {
      totalAssets: 8,
      newAssets: 8,
      totalHosts: 4,
      newHosts: 4,
      totalPeripherals: 4,
      newPeripherals: 4,
      // Two switches reported (floor3-sw1 by two... one agent, core-sw2 by another).
      networking: 2,
      newNetworking: 2,
      onlineAssets: 7,
      // High: the attacked host, the attack tool, the receiver and its host; medium: the rest.
      assetsRisk: { high: 4, medium: 4, low: 0 },
    })
    const dist = await call(app, nac, { url: '/prime/webui/transformerDataApi/assetsDistribuition' })
    t.equal(dist.statusCode, 200, dist.body)
    const d = dist.json()
    t.equal(d.totalAssets, 8)
    t.same(
      d.byType.map((x: any) => [x.type, x.count]),
      [
        [1, 4],
        [2, 2],
        [3, 1],
        [10, 1],
      ],
    )
    // The mouse is on two of three hosts: rare (PRIME_UNCOMMON_PERIPHERAL_MAX_HOSTS 2), risk 5.
    t.same(
      d.byRiskLevel.map((x: any) => [x.riskLevel, x.count]),
      [
        [9, 2],
        [7, 2],
        [5, 2],
        [4, 2],
      ],
    )
  })
})
