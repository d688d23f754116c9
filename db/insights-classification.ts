// Risk insights: the agents classified by their columns' values, severity and risk, and the
// present peripherals by class.
import type { DB } from './index.js'
import type { ClassificationList, ClassificationRows, RiskCount } from '../lib/insights/ports.js'

export const classColumns = {
  byConnectionStatus: 'connection_status',
  byOperationalStatus: 'operational_status',
  byDisplayStatus: 'display_status',
  byLicenseStatus: 'license_status',
  byRunningMode: 'running_mode',
  byOsVersion: 'os_version',
  byServiceVersion: 'service_version',
} as const satisfies Record<ClassificationList, string>
export const riskColumns = {
  withUnapprovedPeripherals: 'has_unapproved',
  withVulnerablePeripherals: 'has_vulnerable',
  withKnownAttackTools: 'has_attack_tool',
  withVulnerablePeripheralOrWLV: 'vulnerable_or_wlv',
  inAction: 'in_action',
} as const satisfies Record<RiskCount, string>

export function classificationStore(db: DB) {
  // ---- classification ----
  // Every combination of the counted columns with its count, in one scan of the covering
  // index agents_classes (migrations 004, 036); the combinations are few, and summed up below.
  // The connection and display statuses are not in it (a mass disconnect would move every
  // entry): the connected agents are counted by display status from agents_connected, and
  // the others are Disconnected (db/agent-state.ts decides that before anything else).
  const CLASS_KEY = `in_action, operational_status, license_status, running_mode,
    severity, has_unapproved, has_vulnerable, has_attack_tool, vulnerable_or_wlv, os_version, service_version`
  const keyColumns = Object.entries(classColumns).filter(([list]) => list !== 'byConnectionStatus' && list !== 'byDisplayStatus') as [keyof typeof classColumns, keyof ClassRow][]
  type ClassRow = Record<(typeof classColumns)[keyof typeof classColumns], string | null> & Record<(typeof riskColumns)[keyof typeof riskColumns], number> & { severity: number; n: number }
  const classes = db.prepare<[], ClassRow>(`SELECT ${CLASS_KEY}, count(*) AS n FROM agents GROUP BY ${CLASS_KEY}`)
  const connectedByDisplay = db.prepare<[], { display_status: string; n: number }>("SELECT display_status, count(*) AS n FROM agents WHERE connection_status = 'Connected' GROUP BY display_status")
  const peripheralsByClass = db.prepare<[], { dev_icon: number; present: number; approved: number }>(
    'SELECT dev_icon, count(*) AS present, sum(approved) AS approved FROM peripherals WHERE present = 1 GROUP BY dev_icon ORDER BY dev_icon',
  )

  return {
    /** The agents counted by each classifying column's values, by severity and by risk, and the present peripherals by class. */
    classification(): ClassificationRows {
      return db.transaction(() => {
        const counts = Object.fromEntries(Object.keys(classColumns).map((k) => [k, new Map<string | null, number>()])) as ClassificationRows['counts']
        const severities = new Map<number, number>()
        const risk = Object.fromEntries(Object.keys(riskColumns).map((k) => [k, 0])) as ClassificationRows['risk']
        let totalAgents = 0
        for (const row of classes.iterate()) {
          totalAgents += row.n
          for (const [list, column] of keyColumns) {
            const value = row[column] as string | null
            counts[list].set(value, (counts[list].get(value) ?? 0) + row.n)
          }
          for (const [name, column] of Object.entries(riskColumns) as [keyof typeof riskColumns, keyof ClassRow][]) if (row[column]) risk[name] += row.n
          severities.set(row.severity, (severities.get(row.severity) ?? 0) + row.n)
        }
        let connected = 0
        for (const { display_status, n } of connectedByDisplay.iterate()) {
          connected += n
          counts.byDisplayStatus.set(display_status, (counts.byDisplayStatus.get(display_status) ?? 0) + n)
        }
        if (connected) counts.byConnectionStatus.set('Connected', connected)
        if (totalAgents > connected) {
          counts.byConnectionStatus.set('Disconnected', totalAgents - connected)
          counts.byDisplayStatus.set('Disconnected', (counts.byDisplayStatus.get('Disconnected') ?? 0) + totalAgents - connected)
        }
        return { totalAgents, counts, severities, risk, peripheralsByClass: peripheralsByClass.all() }
      })()
    },
  }
}
