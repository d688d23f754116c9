/**
 * The agent filters of one risk flag, by filter field, and the column of `agents` that holds
 * the flag. Both backends keep the number of flagged agents by triggers, under the name
 * `agents.<column>` (SQLite's `row_counts`, migration 018; PostgreSQL's `table_rows`,
 * migration 019), so that such a filter alone is counted without reading the agents.
 */
export const FLAG_COLUMNS: Readonly<Record<string, string>> = {
  hasUnapprovedPeripherals: 'has_unapproved',
  hasVulnerablePeripherals: 'has_vulnerable',
  hasKnownAttackTools: 'has_attack_tool',
  containsVulnerablePeripheralOrWLV: 'vulnerable_or_wlv',
}
