-- Cost that survives a model without a price (issue 24): the tokens of such
-- models are counted apart, and the cost is that of the priced ones. A row
-- from before keeps its NULL cost (unknown).
ALTER TABLE run_usage ADD COLUMN unpriced_tokens BIGINT NOT NULL DEFAULT 0;
