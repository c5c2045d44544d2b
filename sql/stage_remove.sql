-- Stage `remove`: the pairs whose key is not among {keys_table} (DP-SIPS Alg. 3 line 9: W_j ← W_j \ P_i).
-- idents: pairs, keys_table, match
-- params:
SELECT p.* FROM {pairs} AS p ANTI JOIN {keys_table} AS r ON {match}
