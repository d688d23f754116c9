-- Asset discovery (transformerDataApi/assets, /sepio-data) pages every asset in order of
-- first sight by default: the agents' and peripherals' branches are read from these
-- indexes and merged, so a deep page of a million peripherals sorts nothing.
CREATE INDEX agents_enrolled ON agents (enrolled_ms, id);
CREATE INDEX peripherals_first_seen ON peripherals (first_seen_ms, id);
