-- Seats in use: every enrollment (is a seat free?), every sweep with an agent waiting, and
-- every health check count the Activated agents. Counting them read an index entry per
-- agent: 10-20 ms at 100,000 agents, each time. Nearly every agent is Activated, so the
-- others are indexed instead (few entries), and Activated is the kept agent count minus
-- them (db/gateway.ts, db/notifications.ts).
CREATE INDEX agents_license_unactivated ON agents (license_status) WHERE license_status <> 'Activated';
