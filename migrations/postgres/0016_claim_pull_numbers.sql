-- A claim keeps its pull request's number as the forge answered it when lab
-- opened it (issue 26): nothing reads it back out of the URL. Claims from
-- before keep the number their URL ends with (`…/pull/N`, `…/pulls/N`).
ALTER TABLE afk_claims ADD COLUMN pr_number BIGINT;
UPDATE afk_claims
   SET pr_number = CAST(substring(RTRIM(pr_url, '/') FROM '/([0-9]+)$') AS BIGINT)
 WHERE pr_url IS NOT NULL
   AND RTRIM(pr_url, '/') ~ '/[0-9]+$';
