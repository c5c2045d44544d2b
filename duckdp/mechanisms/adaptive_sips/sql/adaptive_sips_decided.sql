-- Adaptive SIPS: this round's decisions (streamed from the noise stage) into the next state, by name
-- (the insert casts the Arrow keys back to the input's types); released keys carry the round.
-- idents: target, decided, keys
-- params: round
INSERT INTO {target} BY NAME
SELECT {keys}, _dp_level, CASE WHEN _dp_released THEN $round::INTEGER END AS _dp_round FROM {decided}
