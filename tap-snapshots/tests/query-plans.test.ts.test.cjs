/* IMPORTANT
 * This snapshot file is auto-generated, but designed for humans.
 * It should be checked into source control and tracked carefully.
 * Re-generate by setting TAP_SNAPSHOT=1 and running tests.
 * Make sure to inspect the output below.  Do not ignore changes!
 */
'use strict'
exports[`tests/query-plans.test.ts > TAP > the plans of the statements that override the planner > after ANALYZE, as a bulk load (npm run seed) leaves it 1`] = `
Object {
  "agents list": Array [
    String(
      SELECT a.id, a.rev, a.last_updated_ms FROM agents a INDEXED BY agents_unapproved WHERE a.has_unapproved = ? ORDER BY a.host_identifier COLLATE NOCASE ASC, a.uuid ASC LIMIT ? OFFSET ?
      SEARCH a USING INDEX agents_unapproved (has_unapproved=?)
    ),
    String(
      SELECT a.id, a.rev, a.last_updated_ms FROM agents a WHERE 1 ORDER BY +a.os_version COLLATE NOCASE DESC, +a.uuid DESC LIMIT ? OFFSET ?
      SCAN a
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT a.id, a.rev, a.last_updated_ms FROM agents a WHERE a.id IN (SELECT value FROM json_each(?)) AND +a.has_unapproved = 1 ORDER BY +a.pc_model IS NULL, +a.pc_model COLLATE NOCASE ASC, +a.uuid ASC LIMIT ? OFFSET ?
      SCAN a
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
        CREATE BLOOM FILTER
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT count(*) FROM agents a WHERE a.id IN (SELECT value FROM json_each(?)) AND +a.has_unapproved = 1
      SCAN a USING COVERING INDEX agents_unapproved
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
        CREATE BLOOM FILTER
    ),
  ],
  "audit trail list": Array [
    String(
      SELECT DISTINCT severity FROM audit_trail NOT INDEXED WHERE id > ?
      SEARCH audit_trail USING INTEGER PRIMARY KEY (rowid>?)
      USE TEMP B-TREE FOR DISTINCT
    ),
    String(
      SELECT count(*) FROM audit_trail NOT INDEXED WHERE id > ?
      SEARCH audit_trail USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT count(*) FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT count(*) FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT count(*) FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ? AND e.severity IN (?)
      SEARCH e USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT count(*) FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.user_name LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT e.id, e.created_ms, e.severity, e.category, e.user_name, e.source_ip, e.description, e.details, e.operation_id, e.outcome, e.asset_key, e.asset_name, e.asset_parent_id, e.asset_ip, e.asset_type, e.asset_sub_type, e.asset_detail, e.asset_icon, e.request_id FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ? AND e.severity IN (?) ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT e.id, e.created_ms, e.severity, e.category, e.user_name, e.source_ip, e.description, e.details, e.operation_id, e.outcome, e.asset_key, e.asset_name, e.asset_parent_id, e.asset_ip, e.asset_type, e.asset_sub_type, e.asset_detail, e.asset_icon, e.request_id FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.user_name LIKE ? ESCAPE '\\\\' ORDER BY e.created_ms DESC, e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>?)
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT e.id, e.created_ms, e.severity, e.category, e.user_name, e.source_ip, e.description, e.details, e.operation_id, e.outcome, e.asset_key, e.asset_name, e.asset_parent_id, e.asset_ip, e.asset_type, e.asset_sub_type, e.asset_detail, e.asset_icon, e.request_id FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT e.id, e.created_ms, e.severity, e.category, e.user_name, e.source_ip, e.description, e.details, e.operation_id, e.outcome, e.asset_key, e.asset_name, e.asset_parent_id, e.asset_ip, e.asset_type, e.asset_sub_type, e.asset_detail, e.asset_icon, e.request_id FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>?)
    ),
  ],
  "events list": Array [
    String(
      SELECT DISTINCT event_code FROM events NOT INDEXED WHERE id > ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
      USE TEMP B-TREE FOR DISTINCT
    ),
    String(
      SELECT DISTINCT severity FROM events NOT INDEXED WHERE id > ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
      USE TEMP B-TREE FOR DISTINCT
    ),
    String(
      SELECT count(*) FROM events NOT INDEXED WHERE id > ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.asset_key LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.category IN (?)
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.category IN (?) AND e.severity IN (?)
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ? AND e.severity <= ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.details LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.entity_id LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.event_code IN (?) AND e.asset_key LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.severity <= ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events t INDEXED BY events_created WHERE t.created_ms BETWEEN ? AND ? AND t.id BETWEEN ? AND ?
      SEARCH t USING COVERING INDEX events_created (created_ms>? AND created_ms<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e INDEXED BY events_created WHERE +e.id BETWEEN ? AND ? AND e.category IN (?) ORDER BY e.created_ms DESC, e.id DESC LIMIT ? OFFSET ?
      SCAN e USING INDEX events_created
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e INDEXED BY events_created WHERE +e.id BETWEEN ? AND ? ORDER BY e.created_ms DESC, e.id DESC LIMIT ? OFFSET ?
      SCAN e USING INDEX events_created
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE +e.id BETWEEN ? AND ? AND e.id IN (SELECT x.id FROM json_each(?) j CROSS JOIN event_kind_ids x WHERE x.blk = j.value ->> 0 AND x.kind = j.value ->> 1 AND x.id BETWEEN ? AND ? UNION ALL SELECT id FROM events NOT INDEXED WHERE id > ?) AND e.severity <= ? ORDER BY e.created_ms ASC, e.id ASC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 2
        COMPOUND QUERY
          LEFT-MOST SUBQUERY
            SCAN j VIRTUAL TABLE INDEX 1:
            SEARCH x USING PRIMARY KEY (blk=? AND kind=? AND id>? AND id<?)
          UNION ALL
            SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.category IN (?) AND e.severity IN (?) ORDER BY e.id ASC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.details LIKE ? ESCAPE '\\\\' ORDER BY e.created_ms DESC, e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.event_code IN (?) AND e.asset_key LIKE ? ESCAPE '\\\\' ORDER BY e.id ASC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id IN (SELECT value FROM json_each(?))
      SEARCH e USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id IN (SELECT value FROM json_each(?)) ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
    ),
    String(
      SELECT t.id FROM events t INDEXED BY events_created WHERE t.created_ms BETWEEN ? AND ? AND t.id BETWEEN ? AND ? ORDER BY t.id DESC LIMIT ? OFFSET ?
      SEARCH t USING COVERING INDEX events_created (created_ms>? AND created_ms<?)
      USE TEMP B-TREE FOR ORDER BY
    ),
  ],
  "peripherals list": Array [
    String(
      SELECT p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags FROM peripherals p JOIN agents a ON a.id = p.agent_id WHERE p.present = 1 ORDER BY +p.manufacturer COLLATE NOCASE DESC, +p.device_id DESC, +p.id DESC LIMIT ? OFFSET ?
      SCAN p
      SEARCH a USING INTEGER PRIMARY KEY (rowid=?)
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags FROM peripherals p JOIN agents a ON a.id = p.agent_id WHERE p.vendor_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'vendor' AND text LIKE ? ESCAPE '\\\\') AND p.present = 1 ORDER BY +p.manufacturer IS NULL, +p.manufacturer COLLATE NOCASE ASC, +p.device_id ASC, +p.id ASC LIMIT ? OFFSET ?
      SCAN p
      LIST SUBQUERY 1
        SEARCH peripheral_texts USING COVERING INDEX sqlite_autoindex_peripheral_texts_1 (kind=?)
        CREATE BLOOM FILTER
      SEARCH a USING INTEGER PRIMARY KEY (rowid=?)
      USE TEMP B-TREE FOR ORDER BY
    ),
  ],
  "prepared at start": Array [
    String(
      SELECT (SELECT n FROM row_counts WHERE name = 'agents') - (SELECT count(*) FROM agents INDEXED BY agents_license_unactivated WHERE license_status <> 'Activated') AS n
      SCAN CONSTANT ROW
      SCALAR SUBQUERY 1
        SEARCH row_counts USING PRIMARY KEY (name=?)
      SCALAR SUBQUERY 2
        SCAN agents USING COVERING INDEX agents_license_unactivated
    ),
    String(
      SELECT (SELECT n FROM row_counts WHERE name = 'agents') - count(*) AS activated, coalesce(sum(license_status = 'Pending'), 0) AS pending, coalesce(sum(license_status = 'Expired'), 0) AS expired, coalesce(sum(license_status = 'Invalid'), 0) AS invalid FROM agents INDEXED BY agents_license_unactivated WHERE license_status <> 'Activated'
      SCAN agents USING COVERING INDEX agents_license_unactivated
      SCALAR SUBQUERY 1
        SEARCH row_counts USING PRIMARY KEY (name=?)
    ),
    String(
      SELECT * FROM audit_trail INDEXED BY audit_trail_refusals WHERE refusal_key = ? AND created_ms > ? ORDER BY created_ms DESC LIMIT 1
      SEARCH audit_trail USING INDEX audit_trail_refusals (refusal_key=? AND created_ms>?)
    ),
    String(
      SELECT count(*) FROM (SELECT 1 FROM peripherals WHERE agent_id = ? AND +vid = ? AND +pid = ? LIMIT 1)
      CO-ROUTINE (subquery-1)
        SEARCH peripherals USING INDEX sqlite_autoindex_peripherals_1 (agent_id=?)
      SCAN (subquery-1)
    ),
    String(
      SELECT count(*) FROM risk_notifications INDEXED BY risk_notifications_unread WHERE dismissed_ms IS NULL AND occurred_seq <= ?
      SEARCH risk_notifications USING COVERING INDEX risk_notifications_unread (occurred_seq<?)
    ),
    String(
      SELECT count(*) FROM risk_notifications INDEXED BY risk_notifications_unread WHERE dismissed_ms IS NULL AND occurred_seq > ?
      SEARCH risk_notifications USING COVERING INDEX risk_notifications_unread (occurred_seq>?)
    ),
    String(
      SELECT count(DISTINCT refusal_key) FROM audit_trail INDEXED BY audit_trail_refusals WHERE refusal_key > ? AND refusal_key < ? AND created_ms > ?
      SEARCH audit_trail USING COVERING INDEX audit_trail_refusals (refusal_key>? AND refusal_key<?)
    ),
    String(
      SELECT e.id, e.created_ms, substr(e.details, 1, 2000) AS details, e.asset_key, k.kind, k.severity, k.title, coalesce(a.host_identifier, e.asset_name, e.entity_id) AS host, a.local_ip_address AS ip, coalesce(p.vid, e.peripheral_vid) AS vid, coalesce(p.pid, e.peripheral_pid) AS pid, p.serial_number AS serial, coalesce(p.device_id, e.peripheral_asset_id) AS device_id, p.gui_pid AS device_name, p.gui_vid AS vendor_name, concat_ws(':', coalesce(p.vid, e.peripheral_vid, ''), coalesce(p.pid, e.peripheral_pid, ''), coalesce(p.serial_number, e.peripheral_asset_id, '')) AS device_key FROM events e NOT INDEXED JOIN risk_notification_kinds k ON k.event_code = e.event_code LEFT JOIN agents a ON a.uuid = e.asset_key LEFT JOIN peripherals p ON p.agent_id = a.id AND p.device_id = e.peripheral_asset_id WHERE e.id BETWEEN ? AND ? AND e.asset_key IS NOT NULL ORDER BY e.id
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
      SEARCH k USING PRIMARY KEY (event_code=?)
      SEARCH a USING INDEX sqlite_autoindex_agents_1 (uuid=?) LEFT-JOIN
      SEARCH p USING INDEX sqlite_autoindex_peripherals_1 (agent_id=? AND device_id=?) LEFT-JOIN
    ),
    String(
      SELECT e.id, e.created_ms, substr(e.details, 1, 2000) AS details, e.asset_key, k.kind, k.severity, k.title, coalesce(a.host_identifier, e.asset_name, e.entity_id) AS host, a.local_ip_address AS ip, coalesce(p.vid, e.peripheral_vid) AS vid, coalesce(p.pid, e.peripheral_pid) AS pid, p.serial_number AS serial, coalesce(p.device_id, e.peripheral_asset_id) AS device_id, p.gui_pid AS device_name, p.gui_vid AS vendor_name, concat_ws(':', coalesce(p.vid, e.peripheral_vid, ''), coalesce(p.pid, e.peripheral_pid, ''), coalesce(p.serial_number, e.peripheral_asset_id, '')) AS device_key FROM events e NOT INDEXED JOIN risk_notification_kinds k ON k.event_code = e.event_code LEFT JOIN agents a ON a.uuid = e.asset_key LEFT JOIN peripherals p ON p.agent_id = a.id AND p.device_id = e.peripheral_asset_id WHERE e.id IN (SELECT value FROM json_each(?)) AND e.asset_key IS NOT NULL ORDER BY e.id
      SEARCH e USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
      SEARCH k USING PRIMARY KEY (event_code=?)
      SEARCH a USING INDEX sqlite_autoindex_agents_1 (uuid=?) LEFT-JOIN
      SEARCH p USING INDEX sqlite_autoindex_peripherals_1 (agent_id=? AND device_id=?) LEFT-JOIN
    ),
    String(
      SELECT id FROM events NOT INDEXED WHERE id BETWEEN ? AND ? AND created_ms BETWEEN ? AND ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT id, created_ms, event_code, severity, category, peripheral_icon, description, hashtags, entity_id, asset_key, asset_name, peripheral_asset_id, details FROM events NOT INDEXED WHERE id > ? ORDER BY id LIMIT ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT id, created_ms, severity, category, operation_id, outcome, asset_type, asset_sub_type, asset_detail, asset_icon FROM audit_trail NOT INDEXED WHERE id > ? ORDER BY id LIMIT ?
      SEARCH audit_trail USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT id, uuid, host_identifier, local_ip_address, last_updated_ms FROM agents NOT INDEXED WHERE id > ? AND id <= ? AND connection_status = 'Connected' AND last_updated_ms < ? ORDER BY id LIMIT ?
      SEARCH agents USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT id, uuid, host_identifier, local_ip_address, operational_status, connection_status FROM agents WHERE +has_unapproved = 1 OR +has_vulnerable = 1 OR +has_attack_tool = 1 ORDER BY host_identifier COLLATE NOCASE, uuid LIMIT ?
      SCAN agents USING INDEX agents_host
    ),
    String(
      SELECT min(occurred_seq) FROM risk_notifications INDEXED BY risk_notifications_unread WHERE dismissed_ms IS NULL
      SEARCH risk_notifications USING COVERING INDEX risk_notifications_unread
    ),
    String(
      SELECT upper(peripheral_vid) AS vid, upper(peripheral_pid) AS pid, asset_key, max(asset_name) AS asset_name, max(peripheral_icon) AS icon, count(*) AS n, min(created_ms) AS first, max(created_ms) AS last FROM events NOT INDEXED WHERE id > @lo AND id <= @hi AND event_code IN ('0x110007', '0x110004') AND created_ms BETWEEN @from AND @to AND peripheral_vid IS NOT NULL AND peripheral_pid IS NOT NULL GROUP BY 1, 2, 3
      SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
      USE TEMP B-TREE FOR GROUP BY
    ),
  ],
  "retention": Array [
    String(
      SELECT id, created_ms, event_code, severity, category, entity_id, description, details, hashtags, peripheral_icon, asset_key, asset_name, peripheral_asset_id FROM events INDEXED BY events_created WHERE created_ms < ? AND (created_ms, id) > (?, ?) AND id <= ? ORDER BY created_ms, id LIMIT ?
      SEARCH events USING INDEX events_created (created_ms>? AND created_ms<?)
    ),
    String(
      SELECT id, created_ms, severity, category, user_name, source_ip, description, details, operation_id, outcome, asset_key, asset_name, asset_parent_id, asset_ip, asset_type, asset_sub_type, asset_detail, asset_icon, request_id FROM audit_trail INDEXED BY audit_trail_created WHERE created_ms < ? AND (created_ms, id) > (?, ?) AND id <= ? ORDER BY created_ms, id LIMIT ?
      SEARCH audit_trail USING INDEX audit_trail_created (created_ms>? AND created_ms<?)
    ),
  ],
}
`

exports[`tests/query-plans.test.ts > TAP > the plans of the statements that override the planner > as the server finds the database (no statistics) 1`] = `
Object {
  "agents list": Array [
    String(
      SELECT a.id, a.rev, a.last_updated_ms FROM agents a INDEXED BY agents_unapproved WHERE a.has_unapproved = ? ORDER BY a.host_identifier COLLATE NOCASE ASC, a.uuid ASC LIMIT ? OFFSET ?
      SEARCH a USING INDEX agents_unapproved (has_unapproved=?)
    ),
    String(
      SELECT a.id, a.rev, a.last_updated_ms FROM agents a WHERE 1 ORDER BY +a.os_version COLLATE NOCASE DESC, +a.uuid DESC LIMIT ? OFFSET ?
      SCAN a
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT a.id, a.rev, a.last_updated_ms FROM agents a WHERE a.id IN (SELECT value FROM json_each(?)) AND +a.has_unapproved = 1 ORDER BY +a.pc_model IS NULL, +a.pc_model COLLATE NOCASE ASC, +a.uuid ASC LIMIT ? OFFSET ?
      SEARCH a USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT count(*) FROM agents a WHERE a.id IN (SELECT value FROM json_each(?)) AND +a.has_unapproved = 1
      SEARCH a USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
    ),
  ],
  "audit trail list": Array [
    String(
      SELECT DISTINCT severity FROM audit_trail NOT INDEXED WHERE id > ?
      SEARCH audit_trail USING INTEGER PRIMARY KEY (rowid>?)
      USE TEMP B-TREE FOR DISTINCT
    ),
    String(
      SELECT count(*) FROM audit_trail NOT INDEXED WHERE id > ?
      SEARCH audit_trail USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT count(*) FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ? AND e.severity IN (?)
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.user_name LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.severity, e.category, e.user_name, e.source_ip, e.description, e.details, e.operation_id, e.outcome, e.asset_key, e.asset_name, e.asset_parent_id, e.asset_ip, e.asset_type, e.asset_sub_type, e.asset_detail, e.asset_icon, e.request_id FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ? AND e.severity IN (?) ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.severity, e.category, e.user_name, e.source_ip, e.description, e.details, e.operation_id, e.outcome, e.asset_key, e.asset_name, e.asset_parent_id, e.asset_ip, e.asset_type, e.asset_sub_type, e.asset_detail, e.asset_icon, e.request_id FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.user_name LIKE ? ESCAPE '\\\\' ORDER BY e.created_ms DESC, e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT e.id, e.created_ms, e.severity, e.category, e.user_name, e.source_ip, e.description, e.details, e.operation_id, e.outcome, e.asset_key, e.asset_name, e.asset_parent_id, e.asset_ip, e.asset_type, e.asset_sub_type, e.asset_detail, e.asset_icon, e.request_id FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.severity, e.category, e.user_name, e.source_ip, e.description, e.details, e.operation_id, e.outcome, e.asset_key, e.asset_name, e.asset_parent_id, e.asset_ip, e.asset_type, e.asset_sub_type, e.asset_detail, e.asset_icon, e.request_id FROM audit_trail e NOT INDEXED WHERE e.id BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
  ],
  "events list": Array [
    String(
      SELECT DISTINCT event_code FROM events NOT INDEXED WHERE id > ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
      USE TEMP B-TREE FOR DISTINCT
    ),
    String(
      SELECT DISTINCT severity FROM events NOT INDEXED WHERE id > ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
      USE TEMP B-TREE FOR DISTINCT
    ),
    String(
      SELECT count(*) FROM events NOT INDEXED WHERE id > ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.asset_key LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.category IN (?)
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.category IN (?) AND e.severity IN (?)
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ? AND e.severity <= ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.details LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.entity_id LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.event_code IN (?) AND e.asset_key LIKE ? ESCAPE '\\\\'
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.severity <= ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT count(*) FROM events t INDEXED BY events_created WHERE t.created_ms BETWEEN ? AND ? AND t.id BETWEEN ? AND ?
      SEARCH t USING COVERING INDEX events_created (created_ms>? AND created_ms<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e INDEXED BY events_created WHERE +e.id BETWEEN ? AND ? AND e.category IN (?) ORDER BY e.created_ms DESC, e.id DESC LIMIT ? OFFSET ?
      SCAN e USING INDEX events_created
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e INDEXED BY events_created WHERE +e.id BETWEEN ? AND ? ORDER BY e.created_ms DESC, e.id DESC LIMIT ? OFFSET ?
      SCAN e USING INDEX events_created
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE +e.id BETWEEN ? AND ? AND e.id IN (SELECT x.id FROM json_each(?) j CROSS JOIN event_kind_ids x WHERE x.blk = j.value ->> 0 AND x.kind = j.value ->> 1 AND x.id BETWEEN ? AND ? UNION ALL SELECT id FROM events NOT INDEXED WHERE id > ?) AND e.severity <= ? ORDER BY e.created_ms ASC, e.id ASC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 2
        COMPOUND QUERY
          LEFT-MOST SUBQUERY
            SCAN j VIRTUAL TABLE INDEX 1:
            SEARCH x USING PRIMARY KEY (blk=? AND kind=? AND id>? AND id<?)
          UNION ALL
            SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.category IN (?) AND e.severity IN (?) ORDER BY e.id ASC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.created_ms BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.details LIKE ? ESCAPE '\\\\' ORDER BY e.created_ms DESC, e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? AND e.event_code IN (?) AND e.asset_key LIKE ? ESCAPE '\\\\' ORDER BY e.id ASC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id BETWEEN ? AND ? ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id IN (SELECT value FROM json_each(?))
      SEARCH e USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
    ),
    String(
      SELECT e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id FROM events e NOT INDEXED WHERE e.id IN (SELECT value FROM json_each(?)) ORDER BY e.id DESC LIMIT ? OFFSET ?
      SEARCH e USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
    ),
    String(
      SELECT t.id FROM events t INDEXED BY events_created WHERE t.created_ms BETWEEN ? AND ? AND t.id BETWEEN ? AND ? ORDER BY t.id DESC LIMIT ? OFFSET ?
      SEARCH t USING COVERING INDEX events_created (created_ms>? AND created_ms<?)
      USE TEMP B-TREE FOR ORDER BY
    ),
  ],
  "peripherals list": Array [
    String(
      SELECT p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags FROM peripherals p JOIN agents a ON a.id = p.agent_id WHERE p.present = 1 ORDER BY +p.manufacturer COLLATE NOCASE DESC, +p.device_id DESC, +p.id DESC LIMIT ? OFFSET ?
      SCAN p USING INDEX peripherals_present_class
      SEARCH a USING INTEGER PRIMARY KEY (rowid=?)
      USE TEMP B-TREE FOR ORDER BY
    ),
    String(
      SELECT p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags FROM peripherals p JOIN agents a ON a.id = p.agent_id WHERE p.vendor_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'vendor' AND text LIKE ? ESCAPE '\\\\') AND p.present = 1 ORDER BY +p.manufacturer IS NULL, +p.manufacturer COLLATE NOCASE ASC, +p.device_id ASC, +p.id ASC LIMIT ? OFFSET ?
      SEARCH p USING INDEX peripherals_vendor (vendor_text_id=?)
      LIST SUBQUERY 1
        SEARCH peripheral_texts USING COVERING INDEX sqlite_autoindex_peripheral_texts_1 (kind=?)
      SEARCH a USING INTEGER PRIMARY KEY (rowid=?)
      USE TEMP B-TREE FOR ORDER BY
    ),
  ],
  "prepared at start": Array [
    String(
      SELECT (SELECT n FROM row_counts WHERE name = 'agents') - (SELECT count(*) FROM agents INDEXED BY agents_license_unactivated WHERE license_status <> 'Activated') AS n
      SCAN CONSTANT ROW
      SCALAR SUBQUERY 1
        SEARCH row_counts USING PRIMARY KEY (name=?)
      SCALAR SUBQUERY 2
        SCAN agents USING COVERING INDEX agents_license_unactivated
    ),
    String(
      SELECT (SELECT n FROM row_counts WHERE name = 'agents') - count(*) AS activated, coalesce(sum(license_status = 'Pending'), 0) AS pending, coalesce(sum(license_status = 'Expired'), 0) AS expired, coalesce(sum(license_status = 'Invalid'), 0) AS invalid FROM agents INDEXED BY agents_license_unactivated WHERE license_status <> 'Activated'
      SCAN agents USING COVERING INDEX agents_license_unactivated
      SCALAR SUBQUERY 1
        SEARCH row_counts USING PRIMARY KEY (name=?)
    ),
    String(
      SELECT * FROM audit_trail INDEXED BY audit_trail_refusals WHERE refusal_key = ? AND created_ms > ? ORDER BY created_ms DESC LIMIT 1
      SEARCH audit_trail USING INDEX audit_trail_refusals (refusal_key=? AND created_ms>?)
    ),
    String(
      SELECT count(*) FROM (SELECT 1 FROM peripherals WHERE agent_id = ? AND +vid = ? AND +pid = ? LIMIT 1)
      CO-ROUTINE (subquery-1)
        SEARCH peripherals USING INDEX sqlite_autoindex_peripherals_1 (agent_id=?)
      SCAN (subquery-1)
    ),
    String(
      SELECT count(*) FROM risk_notifications INDEXED BY risk_notifications_unread WHERE dismissed_ms IS NULL AND occurred_seq <= ?
      SEARCH risk_notifications USING COVERING INDEX risk_notifications_unread (occurred_seq<?)
    ),
    String(
      SELECT count(*) FROM risk_notifications INDEXED BY risk_notifications_unread WHERE dismissed_ms IS NULL AND occurred_seq > ?
      SEARCH risk_notifications USING COVERING INDEX risk_notifications_unread (occurred_seq>?)
    ),
    String(
      SELECT count(DISTINCT refusal_key) FROM audit_trail INDEXED BY audit_trail_refusals WHERE refusal_key > ? AND refusal_key < ? AND created_ms > ?
      SEARCH audit_trail USING COVERING INDEX audit_trail_refusals (refusal_key>? AND refusal_key<?)
    ),
    String(
      SELECT e.id, e.created_ms, substr(e.details, 1, 2000) AS details, e.asset_key, k.kind, k.severity, k.title, coalesce(a.host_identifier, e.asset_name, e.entity_id) AS host, a.local_ip_address AS ip, coalesce(p.vid, e.peripheral_vid) AS vid, coalesce(p.pid, e.peripheral_pid) AS pid, p.serial_number AS serial, coalesce(p.device_id, e.peripheral_asset_id) AS device_id, p.gui_pid AS device_name, p.gui_vid AS vendor_name, concat_ws(':', coalesce(p.vid, e.peripheral_vid, ''), coalesce(p.pid, e.peripheral_pid, ''), coalesce(p.serial_number, e.peripheral_asset_id, '')) AS device_key FROM events e NOT INDEXED JOIN risk_notification_kinds k ON k.event_code = e.event_code LEFT JOIN agents a ON a.uuid = e.asset_key LEFT JOIN peripherals p ON p.agent_id = a.id AND p.device_id = e.peripheral_asset_id WHERE e.id BETWEEN ? AND ? AND e.asset_key IS NOT NULL ORDER BY e.id
      SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
      SEARCH k USING PRIMARY KEY (event_code=?)
      SEARCH a USING INDEX sqlite_autoindex_agents_1 (uuid=?) LEFT-JOIN
      SEARCH p USING INDEX sqlite_autoindex_peripherals_1 (agent_id=? AND device_id=?) LEFT-JOIN
    ),
    String(
      SELECT e.id, e.created_ms, substr(e.details, 1, 2000) AS details, e.asset_key, k.kind, k.severity, k.title, coalesce(a.host_identifier, e.asset_name, e.entity_id) AS host, a.local_ip_address AS ip, coalesce(p.vid, e.peripheral_vid) AS vid, coalesce(p.pid, e.peripheral_pid) AS pid, p.serial_number AS serial, coalesce(p.device_id, e.peripheral_asset_id) AS device_id, p.gui_pid AS device_name, p.gui_vid AS vendor_name, concat_ws(':', coalesce(p.vid, e.peripheral_vid, ''), coalesce(p.pid, e.peripheral_pid, ''), coalesce(p.serial_number, e.peripheral_asset_id, '')) AS device_key FROM events e NOT INDEXED JOIN risk_notification_kinds k ON k.event_code = e.event_code LEFT JOIN agents a ON a.uuid = e.asset_key LEFT JOIN peripherals p ON p.agent_id = a.id AND p.device_id = e.peripheral_asset_id WHERE e.id IN (SELECT value FROM json_each(?)) AND e.asset_key IS NOT NULL ORDER BY e.id
      SEARCH e USING INTEGER PRIMARY KEY (rowid=?)
      LIST SUBQUERY 1
        SCAN json_each VIRTUAL TABLE INDEX 1:
      SEARCH k USING PRIMARY KEY (event_code=?)
      SEARCH a USING INDEX sqlite_autoindex_agents_1 (uuid=?) LEFT-JOIN
      SEARCH p USING INDEX sqlite_autoindex_peripherals_1 (agent_id=? AND device_id=?) LEFT-JOIN
    ),
    String(
      SELECT id FROM events NOT INDEXED WHERE id BETWEEN ? AND ? AND created_ms BETWEEN ? AND ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT id, created_ms, event_code, severity, category, peripheral_icon, description, hashtags, entity_id, asset_key, asset_name, peripheral_asset_id, details FROM events NOT INDEXED WHERE id > ? ORDER BY id LIMIT ?
      SEARCH events USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT id, created_ms, severity, category, operation_id, outcome, asset_type, asset_sub_type, asset_detail, asset_icon FROM audit_trail NOT INDEXED WHERE id > ? ORDER BY id LIMIT ?
      SEARCH audit_trail USING INTEGER PRIMARY KEY (rowid>?)
    ),
    String(
      SELECT id, uuid, host_identifier, local_ip_address, last_updated_ms FROM agents NOT INDEXED WHERE id > ? AND id <= ? AND connection_status = 'Connected' AND last_updated_ms < ? ORDER BY id LIMIT ?
      SEARCH agents USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
    ),
    String(
      SELECT id, uuid, host_identifier, local_ip_address, operational_status, connection_status FROM agents WHERE +has_unapproved = 1 OR +has_vulnerable = 1 OR +has_attack_tool = 1 ORDER BY host_identifier COLLATE NOCASE, uuid LIMIT ?
      SCAN agents USING INDEX agents_host
    ),
    String(
      SELECT min(occurred_seq) FROM risk_notifications INDEXED BY risk_notifications_unread WHERE dismissed_ms IS NULL
      SEARCH risk_notifications USING COVERING INDEX risk_notifications_unread
    ),
    String(
      SELECT upper(peripheral_vid) AS vid, upper(peripheral_pid) AS pid, asset_key, max(asset_name) AS asset_name, max(peripheral_icon) AS icon, count(*) AS n, min(created_ms) AS first, max(created_ms) AS last FROM events NOT INDEXED WHERE id > @lo AND id <= @hi AND event_code IN ('0x110007', '0x110004') AND created_ms BETWEEN @from AND @to AND peripheral_vid IS NOT NULL AND peripheral_pid IS NOT NULL GROUP BY 1, 2, 3
      SEARCH events USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)
      USE TEMP B-TREE FOR GROUP BY
    ),
  ],
  "retention": Array [
    String(
      SELECT id, created_ms, event_code, severity, category, entity_id, description, details, hashtags, peripheral_icon, asset_key, asset_name, peripheral_asset_id FROM events INDEXED BY events_created WHERE created_ms < ? AND (created_ms, id) > (?, ?) AND id <= ? ORDER BY created_ms, id LIMIT ?
      SEARCH events USING INDEX events_created (created_ms>? AND created_ms<?)
    ),
    String(
      SELECT id, created_ms, severity, category, user_name, source_ip, description, details, operation_id, outcome, asset_key, asset_name, asset_parent_id, asset_ip, asset_type, asset_sub_type, asset_detail, asset_icon, request_id FROM audit_trail INDEXED BY audit_trail_created WHERE created_ms < ? AND (created_ms, id) > (?, ?) AND id <= ? ORDER BY created_ms, id LIMIT ?
      SEARCH audit_trail USING INDEX audit_trail_created (created_ms>? AND created_ms<?)
    ),
  ],
}
`
