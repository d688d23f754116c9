// Pins GET peripherals (every filter, sort order, paging rule and bad input) and
// peripherals/command (approve or disapprove a model on the matched agents), in the shapes
// the SOAR integration sends and reads.
import t, { type Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { build, call, login, sqliteOnly, userWithProfile } from './helpers.js'
import { addAgent, addPeripheral, insertAgent, insertPeripheral } from './fixtures/fleet.js'
import { latestAudit, query, queryOne, queryValue } from './seed.js'
import { seedFleet } from '../scripts/seed.js'

const COMMAND = '/prime/webui/peripherals/command'

function invalid(t: Test, res: LightMyRequestResponse, name: string) {
  t.equal(res.statusCode, 400, `400 naming ${name}: ${res.body.slice(0, 300)}`)
  t.ok(
    res.json().errors?.some((e: any) => e.name === name),
    `errors name ${name}: ${JSON.stringify(res.json().errors)}`,
  )
}

/** Two agents: a desk PC with a mouse, a USB stick and an old receiver; a laptop with a keystroke injector. */
async function fleet(app: FastifyInstance) {
  const desk = await addAgent(app, {
    uuid: '11111111-1111-4111-8111-111111111111',
    host_identifier: 'DESKTOP-9LR722S',
    local_ip_address: '192.168.100.128',
    ip_addresses: '192.168.100.128 10.99.0.1',
    hashtags: '#finance',
    operational_status: 'Armed',
  })
  const laptop = await addAgent(app, {
    uuid: '22222222-2222-4222-8222-222222222222',
    host_identifier: 'LAPTOP-HR-07',
    local_ip_address: '192.168.100.140',
    ip_addresses: '192.168.100.140',
    hashtags: null,
  })
  const mouse = await addPeripheral(app, desk.id, {
    vid: '046D',
    pid: 'C077',
    serial_number: '5&20DBD6CE&0&4',
    device_id: 'USB\\VID_046D&PID_C077\\5&20DBD6CE&0&4',
    description: 'USB Input Device',
    caption: 'USB Optical Mouse',
  })
  const stick = await addPeripheral(app, desk.id, {
    vid: '0951',
    pid: '1666',
    serial_number: '60A44C413A8EF1A0B9A1BE27',
    device_id: 'USB\\VID_0951&PID_1666\\60A44C413A8EF1A0B9A1BE27',
    description: 'USB Mass Storage Device',
    caption: 'Kingston DataTraveler 3.0 USB Device',
    class_code: '08',
    subclass_code: '06',
    protocol_code: '50',
  })
  const receiver = await addPeripheral(app, desk.id, { vid: '046D', pid: 'C52B', serial_number: 'AB12', device_id: 'USB\\VID_046D&PID_C52B\\AB12', present: 0 })
  const tool = await addPeripheral(app, laptop.id, {
    vid: '16C0',
    pid: '0486',
    serial_number: 'TEENSY-1',
    device_id: 'USB\\VID_16C0&PID_0486\\TEENSY-1',
    manufacturer: 'Teensyduino',
    caption: 'RawHID',
  })
  return { desk, laptop, mouse, stick, receiver, tool }
}

t.test('GET peripherals', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const f = await fleet(app)
  const get = (query: string) => call(app, token, { method: 'GET', url: `/prime/webui/peripherals?${query}` })
  /** `<vid>:<pid>` of each record a query answers, in order. */
  const models = async (query: string) => {
    const res = await get(query)
    t.equal(res.statusCode, 200, `${query}: ${res.body.slice(0, 300)}`)
    return (res.json().data as { vid: string; pid: string }[]).map((p) => `${p.vid}:${p.pid}`)
  }
  const MOUSE = '046D:C077',
    STICK = '0951:1666',
    RECEIVER = '046D:C52B',
    TOOL = '16C0:0486'

  t.test('every peripheral of every agent with the contract fields, default order hostUuid asc then deviceID', async (t) => {
    const res = await get('')
    const body = res.json()
    t.equal(body.recordsTotal, 4)
    t.equal(body.recordsFiltered, 4)
    t.same(
      body.data.map((p: any) => `${p.vid}:${p.pid}`),
      [MOUSE, RECEIVER, STICK, TOOL],
    )
    const stick = body.data[2]
    t.match(stick, {
      uuid: f.desk.uuid,
      hostIdentifier: 'DESKTOP-9LR722S',
      hostIp: '192.168.100.128',
      deviceID: 'USB\\VID_0951&PID_1666\\60A44C413A8EF1A0B9A1BE27',
      guiVid: 'Kingston Technology',
      guiPid: 'DataTraveler 100 G3/G4/SE9 G2/50',
      guiSerial: '60A44C413A8EF1A0B9A1BE27',
      devIcon: 3,
      devIconDescription: 'Mass Storage',
      approved: false,
      present: true,
      isUnapprovedPeripherals: true,
      isVulnerablePeripheral: false,
      isKnownAttackTool: false,
      severity: 4,
      adminStatus: 'NotReviewed',
      hashtags: '#finance #unapproved',
    })
    t.equal(body.data[0].guiSerial, null, 'an OS-made serial is not shown')
    t.match(body.data[1], { present: false, isUnapprovedPeripherals: false, isVulnerablePeripheral: true, hashtags: '#finance #vulnerable' })
    t.match(body.data[1].vulnerability, /Keystroke injection/)
    t.match(body.data[3], { isKnownAttackTool: true, severity: 2, hashtags: '#attack-tool #unapproved' })
  })

  t.test('filters on the agent: hostIdentifier, ipAddress, hostUuid (contains)', async (t) => {
    t.same(await models('hostIdentifier=laptop'), [TOOL])
    t.same(await models('HostIdentifier=-h'), [TOOL], 'two characters')
    t.same(await models('ipAddress=100.128'), [MOUSE, RECEIVER, STICK])
    t.same(await models('ipAddress=10.99'), [], "hostIp only, not another adapter's address")
    t.same(await models('hostUuid=2222-4222'), [TOOL])
    t.same(await models('hostuuid=11'), [MOUSE, RECEIVER, STICK])
  })

  t.test('filters on the peripheral: vendor, productInfo, serialNumber (contains), vid and pid (exact)', async (t) => {
    t.same(await models('vendor=LOGITECH'), [MOUSE, RECEIVER], 'guiVid')
    t.same(await models('vendor=teensyduino'), [TOOL], 'manufacturer')
    t.same(await models('vendor=xyz'), [])
    t.same(await models('productInfo=optical'), [MOUSE], 'caption')
    t.same(await models('productInfo=mass storage'), [STICK], 'description')
    t.same(await models('productInfo=unifying'), [RECEIVER], 'guiPid')
    t.same(await models('serialNumber=a44c41'), [STICK], 'from three characters through the index')
    t.same(await models('serialNumber=b1'), [RECEIVER], 'two characters')
    t.same(await models('serialNumber=VID_'), [], 'the deviceID around the serial does not count')
    t.same(await models('serialNumber=TEENSY'), [TOOL])
    t.same(await models('vid=046d'), [MOUSE, RECEIVER])
    t.same(await models('vid=046D&pid=c52b'), [RECEIVER])
    invalid(t, await get('vid=46D'), 'vid')
    invalid(t, await get('pid=XYZW'), 'pid')
  })

  t.test('boolean filters', async (t) => {
    t.same(await models('isUnapprovedPeripheral=True'), [MOUSE, STICK, TOOL])
    t.same(await models('isUnapprovedPeripheral=0'), [RECEIVER], 'an absent peripheral is not an open violation')
    t.same(await models('isVulnerablePeripheral=true'), [RECEIVER])
    t.same(await models('isKnownAttackTool=TRUE'), [TOOL])
    t.same(await models('present=False'), [RECEIVER])
    t.same(await models('present=1&vendor=logitech'), [MOUSE])
    invalid(t, await get('present=maybe'), 'present')
  })

  t.test('GlobalSearch', async (t) => {
    t.same(await models('GlobalSearch=laptop-hr'), [TOOL], 'host name')
    t.same(await models('GlobalSearch=192.168.100.140'), [TOOL], 'host address')
    t.same(await models('GlobalSearch=kingston'), [STICK], 'vendor and product names')
    t.same(await models('GlobalSearch=20DBD6CE'), [MOUSE], 'deviceID and serial')
    t.same(await models('GlobalSearch=VID_16C0'), [TOOL], 'deviceID')
    t.same(await models('GlobalSearch=keystroke injection'), [RECEIVER], "the catalogue's vulnerability text")
    t.same(await models('GlobalSearch=%23attack-tool'), [TOOL], 'a risk tag')
    t.same(await models('GlobalSearch=%23finance'), [MOUSE, RECEIVER, STICK], "the agent's tags")
    t.same(await models('GlobalSearch=ab'), [RECEIVER, TOOL], 'two characters (a serial, a vulnerability text)')
    t.same(await models('GlobalSearch=kingston&present=false'), [])
    t.same(await models('GlobalSearch=optiplex'), [], "the agent's other fields are not searched")
    t.same(await models('GlobalSearch=10.99.0'), [], 'nor its other addresses')
    invalid(t, await get('serialNumber=%00ab'), 'serialNumber')
    for (const odd of ['%22%22%22', 'a%22b', 'NOT%20OR', '%25_%5C']) {
      t.same(await models(`GlobalSearch=${odd}&serialNumber=${odd}&hostIdentifier=${odd}&vendor=${odd}`), [], `${odd}: an ordinary term`)
    }
  })

  t.test('sortBy: every declared field; hostUuid as the clients send it; ties by deviceID', async (t) => {
    const op = app.contract.operations.get('getPeripherals')!
    for (const field of op.sortFields) {
      for (const dir of ['asc', 'desc']) {
        const res = await get(`sortBy=${field}_${dir}`)
        t.equal(res.statusCode, 200, `${field}_${dir}`)
        t.equal(res.json().data.length, 4)
      }
    }
    t.same(await models('sortBy=hostUuid_asc'), [MOUSE, RECEIVER, STICK, TOOL])
    t.same(await models('sortBy=hostUuid_desc'), [TOOL, STICK, RECEIVER, MOUSE])
    t.same(await models('SortBy=severity_asc'), [TOOL, RECEIVER, MOUSE, STICK], 'name in any case; equal severities by deviceID')
    t.same(await models('sortBy=hostIdentifier_desc'), [TOOL, STICK, RECEIVER, MOUSE])
    t.same(await models('sortBy=guiPid_asc'), [STICK, MOUSE, TOOL, RECEIVER])
    t.same(await models('sortBy=hostIdentifier_desc&vendor=logitech'), [RECEIVER, MOUSE], 'ties by deviceID in the sort direction')
    invalid(t, await get('sortBy=secret_asc'), 'sortBy')
  })

  t.test('paging', async (t) => {
    const res = await get('pageSize=3&pageNumber=2')
    t.same(
      res.json().data.map((p: any) => `${p.vid}:${p.pid}`),
      [TOOL],
    )
    t.equal(res.json().recordsFiltered, 4)
    const filtered = (await get('vendor=logitech&PageSize=1')).json()
    t.same([filtered.recordsTotal, filtered.recordsFiltered, filtered.data.length], [4, 2, 1])
    invalid(t, await get('PageSize=1000001'), 'PageSize')
  })
})

async function setup(t: Test) {
  const app = await build(t)
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'mona', 20)
  const user = await userWithProfile(app, admin, 'ulf', 10)
  return { app, admin, manager, user, ...(await fleet(app)) }
}

const post = (app: FastifyInstance, token: string, payload: unknown) => call(app, token, { method: 'POST', url: COMMAND, payload: payload as any })

const statusOf = async (app: FastifyInstance, id: number) =>
  (await queryOne<{ admin_status: string; approved: number; in_action: number }>(app, 'SELECT admin_status, approved, in_action FROM peripherals WHERE id = ?', id))!

t.test('peripherals/command: APPROVE a model on the matched agent', async (t) => {
  const { app, manager, desk, stick } = await setup(t)
  const second = await addPeripheral(app, desk.id, { vid: '0951', pid: '1666' })
  const res = await post(app, manager, { opCode: 'APPROVE', peripheralsIds: [{ uuid: desk.uuid, hostIdentifier: null, ipAddress: null, vid: '0951', pid: '1666' }] })
  t.equal(res.statusCode, 200, res.body)
  t.same(res.json(), [desk.uuid], 'the uuids of the agents affected')
  t.equal(res.headers['x-items-succeeded'], '1')
  t.equal(res.headers['x-items-failed'], '0')
  for (const id of [stick.id, second.id]) t.match(await statusOf(app, id), { admin_status: 'Approved', approved: 1, in_action: 1 }, 'every peripheral of that model')
  const approval = await queryOne(app, 'SELECT status, changed_by FROM approvals WHERE agent_id = ? AND vid = ? AND pid = ?', desk.id, '0951', '1666')
  t.same(approval, { status: 'Approved', changed_by: 'mona' })
  const commands = await query(app, 'SELECT type, status, parameters FROM agent_commands WHERE agent_id = ?', desk.id)
  t.equal(commands.length, 1)
  t.match(commands[0], { type: 'UpdatePolicy', status: 'Pending' })
  t.same(JSON.parse(commands[0].parameters), { approvedPeripherals: [{ vid: '0951', pid: '1666' }] })
  const [record] = await latestAudit(app)
  t.equal(record.category, 'Peripherals')
  t.equal(record.asset_key, desk.uuid)
  t.match(record.description, /Approved 0951:1666 on agent DESKTOP-9LR722S/)

  const again = await post(app, manager, { opCode: 'approve', peripheralsIds: [{ hostIdentifier: 'desktop-9lr722s', vid: '0951', pid: '1666' }] })
  t.equal(again.statusCode, 200, 'approving what is approved is done (any case of opCode)')
  t.same(again.json(), [desk.uuid])
  t.equal(await queryValue(app, 'SELECT count(*) FROM agent_commands WHERE agent_id = ?', desk.id), 1, 'no new policy when nothing changed')
})

t.test('peripherals/command: DISAPPROVE, several agents, per-item failures', async (t) => {
  const { app, manager, admin, desk, laptop, mouse, stick, tool } = await setup(t)
  await post(app, manager, {
    opCode: 'APPROVE',
    peripheralsIds: [
      { uuid: desk.uuid, vid: '046d', pid: 'c077' },
      { uuid: desk.uuid, vid: '0951', pid: '1666' },
    ],
  })
  const res = await post(app, manager, {
    opCode: 'DISAPPROVE',
    peripheralsIds: [
      { hostIdentifier: 'LAPTOP-HR-07', ipAddress: '192.168.100.140', vid: '16C0', pid: '0486' },
      { uuid: desk.uuid, vid: '0951', pid: '1666' },
      { hostIdentifier: 'PC-7', vid: '0951', pid: '1666' },
      { uuid: desk.uuid, vid: 'FFFF', pid: '0001' },
      { uuid: laptop.uuid, vid: '16C0', pid: '0486' },
      { vid: '0951', pid: '1666' },
    ],
  })
  t.equal(res.statusCode, 200, res.body)
  t.same(res.json(), [laptop.uuid, desk.uuid], 'each agent once, in the order of its first item')
  t.equal(res.headers['x-items-succeeded'], '3')
  t.equal(res.headers['x-items-failed'], '3')
  const failures = JSON.parse(res.headers['x-item-failures'] as string)
  t.same(
    failures.map((f: any) => [f.index, f.code]),
    [
      [2, 'not-found'],
      [3, 'not-found'],
      [5, 'invalid'],
    ],
  )
  t.match(failures[1].reason, /has no peripheral FFFF:0001/)
  t.match(await statusOf(app, stick.id), { admin_status: 'Disapproved', approved: 0 })
  t.match(await statusOf(app, mouse.id), { admin_status: 'Approved', approved: 1 })
  t.match(await statusOf(app, tool.id), { admin_status: 'Disapproved' })
  const policies = await query(app, "SELECT status, parameters FROM agent_commands WHERE agent_id = ? AND type = 'UpdatePolicy' ORDER BY id", desk.id)
  t.same(
    policies.map((p: any) => p.status),
    ['Cancelled', 'Pending'],
    'the newer whitelist replaces the pending one',
  )
  t.same(JSON.parse(policies[1].parameters).approvedPeripherals, [{ vid: '046D', pid: 'C077' }], 'the whitelist without the disapproved model')

  const none = await post(app, manager, { opCode: 'APPROVE', peripheralsIds: [{ uuid: desk.uuid, hostIdentifier: null, ipAddress: null, vid: '0951', pid: '9999' }] })
  t.equal(none.statusCode, 400)
  t.equal(none.json().type, 'urn:prime:problem:no-agent-matched')
  t.same(none.json().errors, [{ location: 'body', name: 'peripheralsIds/0', reason: 'not-found: Agent DESKTOP-9LR722S has no peripheral 0951:9999.' }])
  t.equal((await latestAudit(app))[0].outcome, 'Failed')

  t.equal((await post(app, admin, { opCode: 'DELETE', peripheralsIds: [{ uuid: desk.uuid, vid: '0951', pid: '1666' }] })).statusCode, 400, 'an unknown opCode')
  t.equal((await post(app, admin, { opCode: 'APPROVE', peripheralsIds: [] })).statusCode, 400, 'no items')
})

t.test('peripherals/command: approving a known attack tool needs an Administrator; a User may not approve at all', async (t) => {
  const { app, manager, admin, user, laptop, desk, tool } = await setup(t)
  const byManager = await post(app, manager, {
    opCode: 'APPROVE',
    peripheralsIds: [
      { uuid: laptop.uuid, vid: '16C0', pid: '0486' },
      { uuid: desk.uuid, vid: '046D', pid: 'C077' },
    ],
  })
  t.equal(byManager.statusCode, 200)
  t.same(byManager.json(), [desk.uuid])
  const failures = JSON.parse(byManager.headers['x-item-failures'] as string)
  t.equal(failures[0].code, 'not-allowed')
  t.match(failures[0].reason, /known attack tool.*Administrator/)
  t.match(await statusOf(app, tool.id), { admin_status: 'NotReviewed' })
  const onlyTool = await post(app, manager, { opCode: 'APPROVE', peripheralsIds: [{ uuid: laptop.uuid, vid: '16C0', pid: '0486' }] })
  t.equal(onlyTool.statusCode, 400)
  t.match(onlyTool.json().errors[0].reason, /^not-allowed: /)
  const disapprove = await post(app, manager, { opCode: 'DISAPPROVE', peripheralsIds: [{ uuid: laptop.uuid, vid: '16C0', pid: '0486' }] })
  t.equal(disapprove.statusCode, 200, 'a Manager may disapprove one')
  const byAdmin = await post(app, admin, { opCode: 'APPROVE', peripheralsIds: [{ uuid: laptop.uuid, vid: '16C0', pid: '0486' }] })
  t.equal(byAdmin.statusCode, 200)
  t.match(await statusOf(app, tool.id), { admin_status: 'Approved' })
  t.equal((await post(app, user, { opCode: 'APPROVE', peripheralsIds: [{ uuid: desk.uuid, vid: '046D', pid: 'C077' }] })).statusCode, 403)
  const list = await call(app, user, { method: 'GET', url: '/prime/webui/peripherals?isKnownAttackTool=True' })
  t.equal(list.statusCode, 200, 'a User may list')
  t.equal(list.json().data[0].severity, 2, 'approved or not, an attack tool stays critical')
})

t.test(
  'a vendor or product "contains" alone is counted from the texts\' own counts, which every change keeps right',
  sqliteOnly("peripheral_texts' kept counts (n) and scripts/seed.ts's bulk load are SQLite's"),
  async (t) => {
    const app = await build(t)
    const token = await login(app)
    await seedFleet(app.db, { agents: 40, peripheralsPerAgent: 5, seed: 21 })
    /** Texts whose count differs from the peripherals that name them. */
    const wrong = () =>
      app.db
        .prepare(`SELECT * FROM (SELECT t.id, t.kind, t.text, t.n, (SELECT count(*) FROM peripherals WHERE vendor_text_id = t.id)
    + (SELECT count(*) FROM peripherals WHERE product_text_id = t.id) AS actual FROM peripheral_texts t) WHERE n <> actual`)
        .all()
    /** recordsFiltered of the list, and the count of the rows themselves. */
    const counts = async (kind: 'vendor' | 'productInfo', term: string) => {
      const res = await call(app, token, { method: 'GET', url: `/prime/webui/peripherals?${kind}=${encodeURIComponent(term)}&PageSize=1` })
      const column = kind === 'vendor' ? 'vendor_text_id' : 'product_text_id'
      const actual = app.db.prepare(`SELECT count(*) FROM peripherals p JOIN peripheral_texts x ON x.id = p.${column} WHERE x.text LIKE ?`).pluck().get(`%${term.toLowerCase()}%`)
      return { listed: res.json().recordsFiltered, actual }
    }
    const terms: ['vendor' | 'productInfo', string][] = [
      ['vendor', 'logitech'],
      ['vendor', 'o'],
      ['productInfo', 'receiver'],
      ['productInfo', 'usb'],
      ['vendor', 'no-such-vendor'],
    ]
    const check = async (stage: string) => {
      t.same(wrong(), [], `${stage}: every text counts its peripherals`)
      for (const [kind, term] of terms) {
        const c = await counts(kind, term)
        t.equal(c.listed, c.actual, `${stage}: ${kind}=${term} counts ${c.actual}`)
      }
    }
    await check('after a bulk load')
    t.ok((await counts('vendor', 'o')).actual > 0, 'the terms match peripherals')

    const agent = insertAgent(app, { host_identifier: 'NEW-HOST' })
    for (let i = 0; i < 3; i++) insertPeripheral(app, agent.id, { vid: '046D', pid: 'C52B' })
    await check('after inserts')

    const [first, second] = app.db.prepare("SELECT id FROM peripheral_texts WHERE kind = 'vendor' ORDER BY id LIMIT 2").pluck().all() as number[]
    app.db.prepare('UPDATE peripherals SET vendor_text_id = ? WHERE vendor_text_id = ? AND id % 2 = 0').run(second, first)
    await check('after a vendor text changed')

    const uuids = app.db.prepare('SELECT uuid FROM agents ORDER BY id LIMIT 5').pluck().all()
    const res = await call(app, token, { method: 'POST', url: '/prime/webui/agents/deleteAgents', payload: uuids })
    t.equal(res.statusCode, 200, res.body.slice(0, 200))
    await check('after agents were deleted (their peripherals with them)')
  },
)
