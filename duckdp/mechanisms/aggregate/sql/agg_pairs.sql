-- Private GROUP BY stages 3–4 per (user, key) (docs/specs/private-group-by.md §2), the input of stage 2's
-- Δ0 truncation (stage_sized, stage_truncate): one row per distinct (user, key) of the restricted rows {rows}
-- (agg_rows.sql) with the pair's integers {pair_measures}: of each pair, the m rows first in the keyed order
-- hash(xor(hash(user, key, value), $row_salt)) ({ranks}: per value column, NULL values last and never
-- counted), values clipped and rounded onto each measure's grid. A pair's row and its integers are a function
-- of its user's own rows and the salt, and truncation reads only the pairs, so sampling each pair before
-- truncating keeps exactly the rows that sampling the kept pairs after it would.
-- idents: rows, keys, ranks, pair_measures
-- params: row_salt
WITH knobs AS (      -- the row sample's salt, read by {ranks}
  SELECT $row_salt AS _dp_row_salt
), ranked AS (       -- the rows with their per-(user, key) sample order
  SELECT r.*, {ranks} FROM ({rows}) AS r CROSS JOIN knobs
)
SELECT _dp_user, {keys}, {pair_measures} FROM ranked GROUP BY _dp_user, {keys}
