-- A machine id is one machine whatever its letters' case, as SQLite's COLLATE NOCASE has it
-- (agents may send their MachineGuid in either case): an enrollment naming a known machine
-- in another case finds it, to re-enroll it or hold the request for approval.
ALTER TABLE agents DROP CONSTRAINT agents_machine_id_key;
CREATE UNIQUE INDEX agents_machine_id ON agents (lower(machine_id));
