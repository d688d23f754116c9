-- Delivery errors no longer carry anything of a receiver's answer (its status line and the
-- start of its body, or the network error, which told open ports from closed ones): they
-- say only "refused with a status class" or "unreachable". The texts stored before are
-- rewritten the same way, so that GetAlarmDests and the 0x410001 events stop showing them.

CREATE TEMP TABLE coarse_errors (old TEXT PRIMARY KEY, new TEXT NOT NULL);

INSERT OR IGNORE INTO coarse_errors (old, new)
SELECT e,
  CASE
    WHEN e GLOB 'HTTP [0-9][0-9][0-9]*' THEN
      'The receiver refused it: HTTP ' || substr(e, 6, 1) || 'xx' || CASE WHEN substr(e, 6, 1) = '3' THEN ' (redirects are not followed)' ELSE '' END || '.'
    WHEN e GLOB 'SMTP [0-9][0-9][0-9]*' THEN 'The mail server refused it: SMTP ' || substr(e, 6, 1) || 'xx.'
    WHEN e LIKE 'No recipient accepted%' THEN 'The mail server accepted no recipient.'
    -- The server's own texts: they carry nothing of a receiver's.
    WHEN e LIKE 'The destination''s secret and header values do not open%'
      OR e GLOB 'The event [0-9]* no longer exists.*' OR e GLOB 'The audit record [0-9]* no longer exists.*'
      OR e GLOB 'The asset message [0-9]* no longer exists.*' OR e LIKE 'Outgoing mail is not configured%' THEN e
    -- The rule's own refusals keep their reason; a name that did not resolve was a network failure.
    WHEN e LIKE 'Address refused: %' AND e NOT LIKE '% does not resolve%' THEN 'Address refused by the address rule.'
    WHEN e LIKE 'the SMTP server did not accept it within%' THEN 'The mail server could not be reached: no connection or no answer within 10 s (the cause is in the server log).'
    ELSE 'The receiver could not be reached: no connection or no answer within 10 s (the cause is in the server log).'
  END
  || CASE WHEN e GLOB '* (gave up after [0-9]* attempt* over 24 h)' THEN ' (gave up after its retries over 24 h)' ELSE '' END
FROM (
  SELECT last_error AS e FROM alarm_destinations WHERE last_error IS NOT NULL
  UNION SELECT last_error FROM alarm_outbox WHERE last_error IS NOT NULL
  UNION SELECT error FROM alarm_attempts WHERE error IS NOT NULL
);

UPDATE alarm_destinations SET last_error = (SELECT new FROM coarse_errors WHERE old = last_error) WHERE last_error IS NOT NULL;
UPDATE alarm_outbox SET last_error = (SELECT new FROM coarse_errors WHERE old = last_error) WHERE last_error IS NOT NULL;
UPDATE alarm_attempts SET error = (SELECT new FROM coarse_errors WHERE old = error) WHERE error IS NOT NULL;

-- "Alarm delivery failure" events: `Delivery ... failed for good after N attempt(s): <error>`.
-- The error is what follows the first ": " after " failed for good after "; it is replaced by
-- the coarse text of the delivery it is about (that delivery's row, rewritten above), or a
-- neutral one when that row is gone. Only events that change are touched (an update makes
-- the event index start over).
UPDATE events SET details = substr(details, 1, instr(details, ' failed for good after ') - 1)
    || ' failed for good after '
    || substr(substr(details, instr(details, ' failed for good after ') + 23), 1,
         instr(substr(details, instr(details, ' failed for good after ') + 23), ': ') + 1)
    || coalesce(
         (SELECT o.last_error FROM alarm_outbox o
          WHERE o.destination_id = events.alarm_destination_id AND o.status = 'failed'
            AND substr(events.details, 10, 36) = o.delivery_id),
         'Delivery failed (the detail of failures before this version is no longer shown).')
WHERE event_code = '0x410001' AND instr(details, ' failed for good after ') > 0
  AND instr(substr(details, instr(details, ' failed for good after ') + 23), ': ') > 0
  AND substr(substr(details, instr(details, ' failed for good after ') + 23),
        instr(substr(details, instr(details, ' failed for good after ') + 23), ': ') + 2)
      NOT IN (SELECT new FROM coarse_errors);

DROP TABLE coarse_errors;
