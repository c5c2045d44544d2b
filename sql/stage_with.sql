-- A composed frame that a stage reads twice, as one CTE (DuckDB decides whether to materialise it).
-- Stored tables are referenced by name instead: a CTE over a table scan would be copied.
-- idents: name, query, body
-- params:
WITH {name} AS (
  {query}
)
{body}
