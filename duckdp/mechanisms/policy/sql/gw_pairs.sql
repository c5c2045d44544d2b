-- (user, key) pairs with the number of input rows holding them, for GW (Carvalho et al. AAAI'22;
-- DP-SIPS §3.2.2): no deduplication into sets and no truncation, the counts rank each user's keys.
-- idents: pairs, source, user, key_select
-- params:
CREATE TEMP TABLE {pairs} AS
SELECT {user} AS _dp_user, {key_select}, count(*) AS _dp_n FROM {source} GROUP BY ALL
