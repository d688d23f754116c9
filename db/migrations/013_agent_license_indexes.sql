-- The sweeper (lib/agent-sweeper.ts, every 5 s) asks which agents wait for a license seat
-- and which licenses have expired. Without these indexes both questions read every agent:
-- about 45 ms each at 100,000 agents, on every sweep, and on every batch of a mass
-- disconnect. Few agents ever match either, so the partial indexes stay small.
CREATE INDEX agents_waiting_for_seat ON agents (enrolled_ms, id) WHERE license_status = 'Pending';
CREATE INDEX agents_license_expiry ON agents (expiration_ms)
  WHERE license_status IN ('Activated', 'Pending') AND expiration_ms IS NOT NULL;
