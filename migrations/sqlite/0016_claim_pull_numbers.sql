-- A claim keeps its pull request's number as the forge answered it when lab
-- opened it (issue 26): nothing reads it back out of the URL. Claims from
-- before keep the number their URL ends with (`…/pull/N`, `…/pulls/N`).
ALTER TABLE afk_claims ADD COLUMN pr_number INTEGER;
UPDATE afk_claims
   SET pr_number = CAST(REPLACE(RTRIM(pr_url, '/'), RTRIM(RTRIM(pr_url, '/'), '0123456789'), '') AS INTEGER)
 WHERE pr_url IS NOT NULL
   AND RTRIM(RTRIM(pr_url, '/'), '0123456789') != RTRIM(pr_url, '/');
