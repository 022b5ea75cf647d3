-- Usage rolled up per hour: the writer adds each batch's sums in the same
-- statement that inserts its events (store/src/usage.rs). Reports by hour
-- and by day read this table, by minute the events; the events are kept
-- for weeks, the hours for the report horizon (a year and a month).

CREATE TABLE usage_hourly (
    hour               timestamptz NOT NULL,
    caller             text NOT NULL,
    model              text NOT NULL,
    served_by          text NOT NULL,
    node               text NOT NULL,
    requests           bigint NOT NULL,
    prompt_tokens      bigint NOT NULL,
    completion_tokens  bigint NOT NULL,
    cached_tokens      bigint NOT NULL,
    PRIMARY KEY (hour, caller, model, served_by, node)
);

CREATE INDEX usage_hourly_caller ON usage_hourly (caller, hour);

INSERT INTO usage_hourly
SELECT date_trunc('hour', at), caller, model, served_by, node, count(*),
       sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens)
  FROM usage_events
 GROUP BY 1, 2, 3, 4, 5;
