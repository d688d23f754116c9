import { ASSET_TYPES, type AssetField, HIERARCHY, HOST_ICONS, INDICATOR_RISK, type Source } from '../lib/assets/ports.js'

const HUB_ICON = 4
/** Risk level (0-10) of a syslog severity (0 Emergency ... 7 Debug). */
export const SEVERITY_RISK = [10, 9, 8, 7, 5, 3, 1, 0] as const
export const SOURCES: readonly Source[] = ['agent', 'host', 'peripheral']

const sevRisk = (s: string) => `CASE ${s} ${SEVERITY_RISK.map((r, i) => `WHEN ${i} THEN ${r}`).join(' ')} ELSE 0 END`
const R = INDICATOR_RISK
export const RARE = `(p.vid || ':' || p.pid) IN (SELECT value FROM json_each(@rare))`
/** The rare models' peripherals as their index (vid, pid) finds them: a VID is 4 hex digits, so the first ':' parts the two. */
export const RARE_BY_MODEL = `(p.vid, p.pid) IN (SELECT substr(value, 1, instr(value, ':') - 1), substr(value, instr(value, ':') + 1) FROM json_each(@rare))`
/** An agent's risk; the expression of the index agents_asset_risk (migration 038). */
export const AGENT_RISK = `max(${sevRisk('a.severity')}, a.has_attack_tool * ${R.activeThreat}, a.has_vulnerable * ${R.cve}, a.has_unapproved * ${R.unapproved})`
/** A peripheral's risk without the rare models; the expression of the index peripherals_asset_risk (migration 038). */
export const PERIPHERAL_RISK = `max(${sevRisk('p.severity')}, p.is_attack_tool * CASE WHEN p.present THEN ${R.activeThreat} ELSE ${R.inactiveThreat} END,
      p.is_vulnerable * ${R.cve}, p.is_unapproved * ${R.unapproved})`
const hexMac = (m: string) => `lower(replace(replace(replace(${m}, '-', ''), ':', ''), '.', ''))`
/** The agent's main adapter's MAC (the one carrying its address, else the first with one), as 12 hex digits. */
const AGENT_MAC = `coalesce((SELECT ${hexMac("json_extract(n.value, '$.macAddress')")} FROM json_each(a.nics_json) n
  WHERE coalesce(json_extract(n.value, '$.macAddress'), '') <> ''
  ORDER BY EXISTS (SELECT 1 FROM json_each(n.value, '$.ipAddresses') i WHERE i.value = a.local_ip_address) DESC, n.key LIMIT 1), 'dormant device')`

/** Each field of an asset, per source, as SQL over `a` (agents), `c` (agentless connections) or `p` (peripherals, with its agent `a`). */
export const FIELDS: Record<AssetField, Record<Source, string>> = {
  key: { agent: 'a.uuid', host: 'CAST(c.id AS TEXT)', peripheral: "p.agent_uuid || '/' || p.device_id" },
  name: { agent: 'a.host_identifier', host: 'c.name', peripheral: 'coalesce(p.gui_pid, p.caption, p.description, p.device_id)' },
  mac: { agent: AGENT_MAC, host: "'dormant device'", peripheral: "'dormant device'" },
  ipAddress: { agent: 'a.local_ip_address', host: 'c.address', peripheral: 'a.local_ip_address' },
  model: { agent: 'a.pc_model', host: 'NULL', peripheral: 'coalesce(p.gui_pid, p.caption)' },
  vendor: { agent: 'a.manufacturer', host: 'NULL', peripheral: 'coalesce(p.gui_vid, p.manufacturer)' },
  statusDescription: {
    agent: 'a.display_status',
    host: 'c.status',
    peripheral: "CASE WHEN NOT p.present THEN 'Disconnected' WHEN p.approved THEN 'Approved' WHEN p.admin_status = 'Disapproved' THEN 'Disapproved' ELSE 'Not approved' END",
  },
  switchIp: { agent: 'a.switch_ip', host: 'NULL', peripheral: 'a.switch_ip' },
  switchName: { agent: 'a.switch_name', host: 'NULL', peripheral: 'a.switch_name' },
  portName: { agent: 'coalesce(a.port_name, a.port_id)', host: 'NULL', peripheral: 'coalesce(a.port_name, a.port_id)' },
  type: {
    agent: `CASE a.running_mode WHEN 'Server' THEN ${ASSET_TYPES.Server} WHEN 'VDI' THEN ${ASSET_TYPES.VirtualDesktop} ELSE ${ASSET_TYPES.Workstation} END`,
    host: String(ASSET_TYPES.AgentlessHost),
    peripheral: String(ASSET_TYPES.Peripheral),
  },
  icon: {
    agent: `CASE a.running_mode WHEN 'Server' THEN ${HOST_ICONS.Server} WHEN 'VDI' THEN ${HOST_ICONS.VirtualDesktop} ELSE ${HOST_ICONS.Workstation} END`,
    host: String(HOST_ICONS.AgentlessHost),
    peripheral: 'p.dev_icon',
  },
  hierarchy: { agent: String(HIERARCHY.Host), host: String(HIERARCHY.Host), peripheral: `CASE WHEN p.dev_icon = ${HUB_ICON} THEN ${HIERARCHY.Hub} ELSE ${HIERARCHY.Device} END` },
  riskLevel: {
    agent: AGENT_RISK,
    host: `max(${SEVERITY_RISK[6]}, ${R.unsupervised})`,
    peripheral: `max(${PERIPHERAL_RISK}, (${RARE}) * ${R.rare})`,
  },
  isOnline: { agent: "a.connection_status = 'Connected'", host: "c.status = 'Reachable'", peripheral: "p.present AND a.connection_status = 'Connected'" },
  // The risks an administrator approved: every peripheral behind them is approved.
  isRiskAccepted: {
    agent: '(a.has_attack_tool OR a.has_vulnerable) AND NOT a.has_unapproved',
    host: '0',
    peripheral: `p.approved AND (p.is_attack_tool OR p.is_vulnerable OR ${RARE})`,
  },
  firstSeen: { agent: 'a.enrolled_ms', host: 'c.created_ms', peripheral: 'p.first_seen_ms' },
  lastSeen: { agent: 'a.last_updated_ms', host: 'c.last_reachable_ms', peripheral: 'p.last_seen_ms' },
}
export const NULLABLE_SORTS: ReadonlySet<AssetField> = new Set(['ipAddress', 'model', 'vendor', 'switchIp', 'switchName', 'portName', 'lastSeen'])

export const FROM: Record<Source, string> = {
  agent: 'agents a',
  host: 'agentless_connections c',
  peripheral: 'peripherals p JOIN agents a ON a.id = p.agent_id',
}
/**
 * The source's tables for a statement that reads `sql`: a peripheral's agent is joined only
 * when its columns are read (a million joins cost more than the rest of a count).
 */
export const from = (src: Source, sql: string) => (src === 'peripheral' && !/\ba\./.test(sql) ? 'peripherals p' : FROM[src])
export const ROWID: Record<Source, string> = { agent: 'a.id', host: 'c.id', peripheral: 'p.id' }
/** The fields a global search matches (and an agent's adapters); the gram triggers of migration 039 read the same texts (db/asset-grams.ts). */
export const SEARCHED: AssetField[] = ['name', 'key', 'ipAddress', 'model', 'vendor']

/** The full row of each source, by its rowids (a JSON array). */
export function rowSql(src: Source): string {
  const f = (name: AssetField) => FIELDS[name][src]
  const common = `'${src}' AS source, ${ROWID[src]} AS rowid, ${f('key')} AS key, ${f('name')} AS name, ${f('ipAddress')} AS ip_address,
    ${f('model')} AS model, ${f('vendor')} AS vendor, ${f('statusDescription')} AS status, ${f('type')} AS type, ${f('icon')} AS icon,
    ${f('hierarchy')} AS hierarchy, ${f('riskLevel')} AS risk_level, ${f('isOnline')} AS is_online, ${f('isRiskAccepted')} AS is_risk_accepted,
    ${f('firstSeen')} AS first_seen, ${f('lastSeen')} AS last_seen`
  const where = `WHERE ${ROWID[src]} IN (SELECT value FROM json_each(@ids))`
  switch (src) {
    case 'agent':
      return `SELECT ${common}, a.switch_ip, a.switch_name, a.port_id, a.port_name, a.host_identifier, a.uuid AS agent_uuid, a.nics_json,
        a.has_attack_tool, a.has_attack_tool AS attack_tool_present, a.has_vulnerable, NULL AS vulnerability, 0 AS is_rare, a.has_unapproved,
        0 AS is_unsupervised, NULL AS vid, NULL AS pid, NULL AS host_status
        FROM ${FROM.agent} ${where}`
    case 'host':
      return `SELECT ${common}, NULL AS switch_ip, NULL AS switch_name, NULL AS port_id, NULL AS port_name, NULL AS host_identifier,
        NULL AS agent_uuid, NULL AS nics_json, 0 AS has_attack_tool, 0 AS attack_tool_present, 0 AS has_vulnerable, NULL AS vulnerability,
        0 AS is_rare, 0 AS has_unapproved, 1 AS is_unsupervised, NULL AS vid, NULL AS pid, c.status AS host_status
        FROM ${FROM.host} ${where}`
    case 'peripheral':
      return `SELECT ${common}, a.switch_ip, a.switch_name, a.port_id, a.port_name, a.host_identifier, a.uuid AS agent_uuid, NULL AS nics_json,
        p.is_attack_tool AS has_attack_tool, p.is_attack_tool AND p.present AS attack_tool_present, p.is_vulnerable AS has_vulnerable,
        p.vulnerability, ${RARE} AS is_rare, p.is_unapproved AS has_unapproved, 0 AS is_unsupervised, p.vid, p.pid, a.connection_status AS host_status
        FROM ${FROM.peripheral} ${where}`
  }
}
