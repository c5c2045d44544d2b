-- Stage `truncate`, the users over Δ0 of {sized} by a cut instead of ranking every pair with a tie-break: the
-- same pairs as {window} (stage_truncate_window.sql over {sized}), cheaper where its tie-break carries the key
-- (strings, composites, 128-bit keys: DuckDBStages.truncation_ties). Per user, c = the Δ0 + 1 smallest
-- {order} values, duplicates kept, ascending: c[1] ≤ … ≤ c[Δ0+1] (list_sort(arg_min(x, x, n)): the top-N state
-- DuckDB's window rewrite uses; min(x, n), the same list, spilled without bound at 16 threads and 50M rows in
-- DuckDB 2.0.1: benchmarks/RESULTS.md "truncation cut at 16 threads"). If c[Δ0] < c[Δ0+1], the pairs
-- with order < c[Δ0+1] are exactly the user's Δ0 first in any order that sorts by {order} first, whatever
-- breaks its ties: sorted with duplicates, positions 1..Δ0 hold values ≤ c[Δ0] < c[Δ0+1] and every later
-- position a value ≥ c[Δ0+1], so no tie crosses the cut and the window keeps those same Δ0 pairs. Else (a tie
-- across the cut: c[Δ0] = c[Δ0+1], `_dp_t` NULL) the user's pairs go through {window} (over `_dp_fallback`), which
-- breaks the tie on the key. Kept pairs, `_dp_d` = Δ0 and every release stay those of the window alone.
-- idents: sized, order, window
-- params: max_contributions
SELECT * FROM (
  WITH _dp_cut AS (      -- each user over Δ0: the cut, NULL where a tie crosses it
    SELECT _dp_user, CASE WHEN c[$max_contributions] < c[$max_contributions + 1] THEN c[$max_contributions + 1] END AS _dp_t
    FROM (SELECT _dp_user, list_sort(arg_min({order}, {order}, $max_contributions + 1)) AS c FROM {sized} WHERE _dp_size > $max_contributions
          GROUP BY _dp_user)
  ), _dp_fallback AS (   -- the users whose cut a tie crosses, ranked by the window
    SELECT * FROM {sized} WHERE _dp_user IN (SELECT _dp_user FROM _dp_cut WHERE _dp_t IS NULL)
  )
  SELECT s.* EXCLUDE (_dp_size), $max_contributions::DOUBLE AS _dp_d FROM {sized} AS s JOIN _dp_cut USING (_dp_user)
  WHERE {order} < _dp_cut._dp_t
  UNION ALL
  {window}
)
