-- Stage `store`: materialise a frame as a run-unique TEMP table (dropped when the run closes).
-- idents: target, query
-- params:
CREATE TEMP TABLE {target} AS
{query}
