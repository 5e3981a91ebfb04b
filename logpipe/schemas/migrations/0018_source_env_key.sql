-- 0018: what the environments of a file's runs were last computed from (its manifests'
-- paths, sizes and modification times, the tier rules, the command line's --env, --tag
-- and --tz).  An unchanged file whose key is unchanged keeps its runs' environments
-- without recomputing them.
ALTER TABLE sources ADD COLUMN env_key VARCHAR;
